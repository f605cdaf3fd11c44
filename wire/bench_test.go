package wire

import "testing"

// benchRoundTrip encodes m into a reused buffer and decodes it into a reused
// value, reporting the time and the frame bytes per item.
func benchRoundTrip(b *testing.B, m, into Message, items int) {
	buf, err := Append(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		buf, _ = Append(buf[:0], m)
		if err := DecodeInto(buf, into); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(items), "ns/item")
	b.ReportMetric(float64(len(buf))/float64(items), "bytes/item")
}

func BenchmarkStatusBatch1000(b *testing.B) {
	benchRoundTrip(b, statusBatch(1000), new(StatusBatch), 1000)
}

func BenchmarkAssignments1000(b *testing.B) {
	benchRoundTrip(b, bigAssignments(1000, 9), new(Assignments), 1000)
}

// BenchmarkAssignments1000Raw is the same frame kept under the compression
// threshold by the codec's internals: the cost of the encoding alone.
func BenchmarkAssignments1000Raw(b *testing.B) {
	m := bigAssignments(1000, 9)
	into := new(Assignments)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = appendPayload(buf[:0], m)
		if err := decodePayload(buf, into); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/item")
	b.ReportMetric(float64(len(buf))/1000, "bytes/item")
}

func BenchmarkStatusBatch1000Raw(b *testing.B) {
	m := statusBatch(1000)
	into := new(StatusBatch)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = appendPayload(buf[:0], m)
		if err := decodePayload(buf, into); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/item")
	b.ReportMetric(float64(len(buf))/1000, "bytes/item")
}

func BenchmarkHeartbeat(b *testing.B) {
	benchRoundTrip(b, &Heartbeat{NodeID: 17, SessionID: 9061852}, new(Heartbeat), 1)
}

// The per-call benchmarks: encoding and decoding, separately, an assignment
// answer of 10 and 100 tasks (an incremental poll's size) and a status
// batch, into reused buffers and values, as the manager and the agent do.
func benchEncode(b *testing.B, m Message, items int) {
	buf, err := Append(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	buf = make([]byte, 0, 2*cap(buf))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = Append(buf[:0], m)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(items), "ns/item")
}

func benchDecode(b *testing.B, m, into Message, items int) {
	buf, err := Append(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	if err := DecodeInto(buf, into); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeInto(buf, into); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(items), "ns/item")
}

func incrementalAssignments(n int) *Assignments {
	a := bigAssignments(n, 3)
	a.Kind, a.Specs = FrameIncremental, a.Specs[:min(len(a.Specs), 2)]
	a.Leader = "10.0.0.1:7420"
	return a
}

func BenchmarkEncodeAssignments10(b *testing.B)  { benchEncode(b, incrementalAssignments(10), 10) }
func BenchmarkEncodeAssignments100(b *testing.B) { benchEncode(b, incrementalAssignments(100), 100) }
func BenchmarkEncodeStatusBatch20(b *testing.B)  { benchEncode(b, statusBatch(20), 20) }
func BenchmarkDecodeAssignments10(b *testing.B) {
	benchDecode(b, incrementalAssignments(10), new(Assignments), 10)
}
func BenchmarkDecodeAssignments100(b *testing.B) {
	benchDecode(b, incrementalAssignments(100), new(Assignments), 100)
}
func BenchmarkDecodeStatusBatch20(b *testing.B) {
	benchDecode(b, statusBatch(20), new(StatusBatch), 20)
}

// BenchmarkDecodeAssignments10Fresh decodes into a new value each time, as
// a caller that keeps the decoded tasks must.
func BenchmarkDecodeAssignments10Fresh(b *testing.B) {
	buf, _ := Append(nil, incrementalAssignments(10))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeAs[Assignments](buf); err != nil {
			b.Fatal(err)
		}
	}
}
