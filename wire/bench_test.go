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
