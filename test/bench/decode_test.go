package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	restclientwatch "k8s.io/client-go/rest/watch"
	sigsjson "sigs.k8s.io/json"

	"github.com/wrapup-dev/wrapup/test/framework"
)

// BenchmarkWatchEventDecode measures what one AppWrapper watch event costs
// to decode on the path every informer of wrapup takes, client-go's
// (rest.Request.newStreamWatcher, k8s.io/client-go rest/request.go): the
// JSON framer finds the frame, the streaming decoder decodes the envelope
// (its object kept as raw bytes), and restclientwatch.Decoder decodes the
// object from those bytes; each of the two decodes first reads the kind
// with encoding/json (apimachinery's json.Serializer.Decode,
// SimpleMetaFactory.Interpret), a pass over all the bytes of its own. The
// other case is the same frame decoded once, envelope and object together,
// by the same JSON library the serializer uses for the object: what an
// informer would pay with a decoder that knows the type it watches.
//
//	go test ./test/bench -run '^$' -bench WatchEventDecode -benchmem
func BenchmarkWatchEventDecode(b *testing.B) {
	raw, err := os.ReadFile("../../gc/testdata/appwrapper-running.json")
	if err != nil {
		b.Fatal(err)
	}
	var obj bytes.Buffer
	if err := json.Compact(&obj, raw); err != nil {
		b.Fatal(err)
	}
	// As kube-apiserver writes them: one compact event per line.
	frame := append(append([]byte(`{"type":"MODIFIED","object":`), obj.Bytes()...), "}\n"...)
	const perStream = 64
	stream := bytes.Repeat(frame, perStream)
	b.Logf("event of %d bytes", len(frame))

	negotiator := runtime.NewClientNegotiator(serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(framework.Scheme)}, awv1beta2.GroupVersion)
	b.Run("client-go", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		objectDecoder, streamingSerializer, framer, err := negotiator.StreamDecoder("application/json", nil)
		if err != nil {
			b.Fatal(err)
		}
		var dec *restclientwatch.Decoder
		for i := 0; b.Loop(); i++ {
			if i%perStream == 0 {
				dec = restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream))), streamingSerializer), objectDecoder)
			}
			typ, got, err := dec.Decode()
			if err != nil || typ != watch.Modified || got.(*awv1beta2.AppWrapper).Name != "bench-run" {
				b.Fatalf("decoded %v %T: %v", typ, got, err)
			}
		}
	})
	b.Run("one pass", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		_, _, framer, err := negotiator.StreamDecoder("application/json", nil)
		if err != nil {
			b.Fatal(err)
		}
		var frames io.ReadCloser
		buf := make([]byte, 64<<10)
		for i := 0; b.Loop(); i++ {
			if i%perStream == 0 {
				frames = framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
			}
			n, err := frames.Read(buf)
			if err != nil && !errors.Is(err, io.EOF) {
				b.Fatal(err)
			}
			var ev struct {
				Type   watch.EventType       `json:"type"`
				Object *awv1beta2.AppWrapper `json:"object"`
			}
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(buf[:n], &ev); err != nil || ev.Type != watch.Modified || ev.Object.Name != "bench-run" {
				b.Fatalf("decoded %v: %v", ev.Type, err)
			}
		}
	})
}
