package wire

import (
	"encoding/binary"

	"github.com/klauspost/compress/zstd"
)

// Frame layout:
//
//	"SHW" | version (1) | type | flags | uvarint body length | body
//
// Without flagZstd the body is the payload. With it, the body is the
// payload's uvarint length followed by one zstd frame holding the payload.
const (
	// Version is the frame format version this package writes and reads.
	Version = 1
	// MaxFrame is the largest payload, in bytes before compression, a frame
	// may carry (1 MiB).
	MaxFrame = 1 << 20
	// CompressThreshold is the payload size, in bytes, above which Append
	// compresses with zstd (4 KiB).
	CompressThreshold = 4 << 10
	// MaxFrameOverhead bounds the bytes a frame adds to its payload, so a
	// frame is at most MaxFrame + MaxFrameOverhead bytes.
	MaxFrameOverhead = headerLen + 2*binary.MaxVarintLen32

	magic     = "SHW"
	headerLen = len(magic) + 3 // magic, version, type, flags
	flagZstd  = 1 << 0
)

// Append appends m as one frame to dst. It refuses a payload over MaxFrame
// (ErrTooLarge) and enum values that have no name (ErrMalformed), leaving dst
// as it was. Payloads over CompressThreshold are compressed when that makes
// them smaller. Append into a dst with room for the payload twice does not
// allocate, compressed or not, except for a SessionRequest with labels.
func Append(dst []byte, m Message) ([]byte, error) {
	if m == nil {
		return dst, errorf(ErrType, "nil message")
	}
	start := len(dst)
	dst = append(dst, magic...)
	dst = append(dst, Version, byte(m.Type()), 0)
	// Reserve three bytes for the body length, enough up to 2 MiB; the
	// payload moves left if fewer are needed.
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0)
	p0 := len(dst)
	dst, err := appendPayload(dst, m)
	if err != nil {
		return dst[:start], err
	}
	n := len(dst) - p0
	if n > MaxFrame {
		return dst[:start], errorf(ErrTooLarge, "%s message of %d bytes is over the 1 MiB limit", m.Type(), n)
	}
	if n > CompressThreshold {
		if out, ok := compressInto(dst, lenAt, p0); ok {
			return out, nil
		}
	}
	return putBodyLen(dst, lenAt, p0), nil
}

// putBodyLen writes the length of the body dst[p0:] at lenAt, where three
// bytes are reserved, and closes the gap if it needs fewer.
func putBodyLen(dst []byte, lenAt, p0 int) []byte {
	n := len(dst) - p0
	w := binary.PutUvarint(dst[lenAt:p0], uint64(n))
	if w < p0-lenAt {
		copy(dst[lenAt+w:], dst[p0:])
		dst = dst[:lenAt+w+n]
	}
	return dst
}

// compressInto replaces the payload dst[p0:] by its compressed form if that
// is smaller.
func compressInto(dst []byte, lenAt, p0 int) ([]byte, bool) {
	payload := dst[p0:]
	n := len(payload)
	// The compressed bytes go after the payload (or into a new array if dst
	// is full), then move over it.
	z := encoder.EncodeAll(payload, dst[len(dst):len(dst)])
	var raw [binary.MaxVarintLen32]byte
	rw := binary.PutUvarint(raw[:], uint64(n))
	if rw+len(z) >= n {
		return dst, false
	}
	dst[lenAt-1] |= flagZstd
	copy(dst[p0:], raw[:rw])
	copy(dst[p0+rw:], z)
	dst = dst[:p0+rw+len(z)]
	return putBodyLen(dst, lenAt, p0), true
}

// PeekType returns the type of the frame b starts with, checking only its
// header.
func PeekType(b []byte) (MsgType, error) {
	t, _, _, err := header(b)
	return t, err
}

// header checks a frame's header and returns its type, flags and body.
func header(b []byte) (t MsgType, flags byte, body []byte, err error) {
	if len(b) < headerLen+1 || string(b[:len(magic)]) != magic {
		if len(b) > 0 && b[0] == '{' {
			return 0, 0, nil, errorf(ErrMalformed, "got JSON where a binary frame was expected (JSON goes through DecodeJSON)")
		}
		return 0, 0, nil, errorf(ErrMalformed, "not a Shoal frame (%d bytes, want the %q magic and a header)", len(b), magic)
	}
	if v := b[len(magic)]; v != Version {
		return 0, 0, nil, errorf(ErrVersion, "frame version %d, this Shoal speaks version %d: upgrade the older side", v, Version)
	}
	t, flags = MsgType(b[len(magic)+1]), b[len(magic)+2]
	if !t.Valid() {
		return 0, 0, nil, errorf(ErrType, "frame type %d is unknown to this Shoal", uint8(t))
	}
	if flags&^flagZstd != 0 {
		return 0, 0, nil, errorf(ErrVersion, "frame flags %#x are unknown to this Shoal", flags)
	}
	rest := b[headerLen:]
	n, w := binary.Uvarint(rest)
	switch {
	case w <= 0:
		return 0, 0, nil, errorf(ErrMalformed, "%s frame: body length is cut short or damaged", t)
	case n > MaxFrame+binary.MaxVarintLen32:
		return 0, 0, nil, errorf(ErrTooLarge, "%s message of %d bytes is over the 1 MiB limit", t, n)
	case n != uint64(len(rest)-w):
		return 0, 0, nil, errorf(ErrMalformed, "%s frame says its body has %d bytes but %d follow", t, n, len(rest)-w)
	}
	return t, flags, rest[w:], nil
}

// payload returns the frame's payload, decompressing it if needed.
func payload(b []byte) (MsgType, []byte, error) {
	t, flags, body, err := header(b)
	if err != nil || flags&flagZstd == 0 {
		if err == nil && len(body) > MaxFrame {
			err = errorf(ErrTooLarge, "%s message of %d bytes is over the 1 MiB limit", t, len(body))
		}
		return t, body, err
	}
	n, w := binary.Uvarint(body)
	switch {
	case w <= 0:
		return t, nil, errorf(ErrMalformed, "%s frame: compressed size is cut short or damaged", t)
	case n > MaxFrame:
		return t, nil, errorf(ErrTooLarge, "%s message of %d bytes is over the 1 MiB limit", t, n)
	}
	// The decoder writes at most cap(out) bytes (WithDecodeAllCapLimit).
	out, err := decoder.DecodeAll(body[w:], make([]byte, 0, n))
	if err != nil {
		// zstd's own error is detail for people; callers match the sentinel.
		return t, nil, errorf(ErrMalformed, "%s frame: compressed payload does not decompress: %v", t, err)
	}
	if uint64(len(out)) != n {
		return t, nil, errorf(ErrMalformed, "%s frame: payload decompresses to %d bytes, the frame says %d", t, len(out), n)
	}
	return t, out, nil
}

// Decode decodes one frame into a new message. It never panics, and on any
// input allocates at most a small multiple of the frame's size or MaxFrame.
func Decode(b []byte) (Message, error) {
	t, p, err := payload(b)
	if err != nil {
		return nil, err
	}
	m := New(t)
	if err := decodePayload(p, m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeInto decodes one frame into m, which must be of the frame's type
// (else ErrType). It reuses the storage of m's slices and maps, so values
// taken from m earlier must not be kept across calls.
func DecodeInto(b []byte, m Message) error {
	t, p, err := payload(b)
	if err != nil {
		return err
	}
	if t != m.Type() {
		return errorf(ErrType, "expected a %s message, got %s", m.Type(), t)
	}
	return decodePayload(p, m)
}

// DecodeAs decodes one frame that must be a T.
//
//	ack, err := wire.DecodeAs[wire.StatusAck](body)
func DecodeAs[T any, P interface {
	*T
	Message
}](b []byte) (*T, error) {
	m := P(new(T))
	if err := DecodeInto(b, m); err != nil {
		return nil, err
	}
	return m, nil
}

// The zstd coder pair. Both are used only through EncodeAll and DecodeAll,
// which run on the caller's goroutine: with concurrency 1 neither starts a
// goroutine (zstd's stream mode would; wire never uses it). Each holds one
// coder state, so concurrent callers compress (or decompress) one at a time.
var (
	encoder = mustEncoder()
	decoder = mustDecoder()
)

func mustEncoder() *zstd.Encoder {
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithWindowSize(MaxFrame),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		panic("wire: zstd encoder options: " + err.Error())
	}
	return e
}

func mustDecoder() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(MaxFrame),
		zstd.WithDecoderMaxWindow(MaxFrame),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		panic("wire: zstd decoder options: " + err.Error())
	}
	return d
}
