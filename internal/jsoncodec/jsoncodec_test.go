package jsoncodec_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/internal/jsoncodec"
)

// Property: for random values of every type the API writes, the codec
// writes the bytes encoding/json writes (Marshal, and Encoder lines), and
// reads encoding/json's bytes back into the value encoding/json reads.
func TestCodecMatchesEncodingJSON(t *testing.T) {
	types := []any{
		client.Event{}, client.Task{}, client.Service{}, client.Node{}, client.Network{},
		client.Status{}, client.ErrorBody{}, client.List[client.Task]{}, client.List[client.Service]{},
		client.List[client.Node]{}, client.List[client.Network]{}, client.JoinAnswer{}, client.Replicas{},
		client.RenewAnswer{}, client.TokenDoc{}, client.PeerTokens{},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, proto := range types {
		typ := reflect.TypeOf(proto)
		for i := range 300 {
			v := reflect.New(typ)
			fill(r, v.Elem(), 0)
			want, err := json.Marshal(v.Interface())
			if err != nil {
				t.Fatalf("%v: encoding/json: %v", typ, err)
			}
			got, err := jsoncodec.Marshal(v.Interface())
			if err != nil {
				t.Fatalf("%v #%d: %v", typ, i, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%v #%d: the codec wrote\n%s\nencoding/json wrote\n%s", typ, i, got, want)
			}
			var line bytes.Buffer
			if err := jsoncodec.NewEncoder(&line).Encode(v.Interface()); err != nil || line.String() != string(want)+"\n" {
				t.Fatalf("%v #%d: the encoder wrote %q (%v), want %q", typ, i, line.String(), err, string(want)+"\n")
			}
			back, std := reflect.New(typ), reflect.New(typ)
			if err := jsoncodec.Unmarshal(want, back.Interface()); err != nil {
				t.Fatalf("%v #%d: read back: %v\n%s", typ, i, err, want)
			}
			if err := json.Unmarshal(want, std.Interface()); err != nil {
				t.Fatalf("%v #%d: encoding/json read back: %v", typ, i, err)
			}
			if !reflect.DeepEqual(back.Interface(), std.Interface()) {
				t.Fatalf("%v #%d: the codec read\n%+v\nencoding/json read\n%+v\nfrom %s", typ, i, back.Elem(), std.Elem(), want)
			}
		}
	}
}

// texts are strings a field may hold: HTML, quotes, control characters,
// other scripts, invalid UTF-8, empty.
var texts = []string{"", "web", "a<b>&c", `say "hi"\n`, "tab\there\x01", "zone=ä", "名前", "\xff\xfebad", "\u2028\u2029", "10.0.0.5/24"}

// fill gives v random contents, at most three deep in containers.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	if v.Type() == reflect.TypeOf(time.Time{}) {
		v.Set(reflect.ValueOf(time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC()))
		return
	}
	if v.Type() == reflect.TypeOf(json.RawMessage{}) {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(texts[r.IntN(len(texts))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(r.Uint64()) >> (r.IntN(4) * 16) >> (64 - v.Type().Bits()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(r.Uint64() >> (r.IntN(4) * 16) >> (64 - v.Type().Bits()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat([]float64{0, 0.5, 1e21, 1e-7, 123.456, -3}[r.IntN(6)])
	case reflect.Pointer:
		if depth < 3 && r.IntN(2) == 0 {
			p := reflect.New(v.Type().Elem())
			fill(r, p.Elem(), depth+1)
			v.Set(p)
		}
	case reflect.Slice:
		if depth < 3 && r.IntN(3) > 0 {
			n := r.IntN(4)
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				fill(r, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		if depth < 3 && r.IntN(3) > 0 {
			m := reflect.MakeMap(v.Type())
			for range r.IntN(4) {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				fill(r, k, depth+1)
				fill(r, e, depth+1)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), depth)
			}
		}
	}
}
