package jsoncodec

import (
	"io"

	json "github.com/goccy/go-json"
)

// Marshal returns the JSON encoding of v, as encoding/json.Marshal would.
func Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data into v, as encoding/json.Unmarshal would.
func Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Encoder writes JSON values to a stream, one per line.
type Encoder = json.Encoder

// NewEncoder returns an encoder writing to w, as encoding/json.NewEncoder.
func NewEncoder(w io.Writer) *Encoder { return json.NewEncoder(w) }
