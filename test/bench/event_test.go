package bench

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// BenchmarkEventRequest measures what one of wrapup's Events costs the
// client to encode as a create's body and to decode from its answer (the
// Event back), in JSON and in protobuf: the API server decodes and
// encodes the same bytes on its side.
//
//	go test ./test/bench -run '^$' -bench EventRequest -benchmem
func BenchmarkEventRequest(b *testing.B) {
	now := metav1.NewMicroTime(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	ev := &eventsv1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: "bench-0.187d2c5f3a2b1c00", Namespace: "tp-1-wrapup-0", ResourceVersion: "123456", UID: "9d2f0b1e-0000-4000-8000-000000000001", CreationTimestamp: metav1.NewTime(now.Time),
			// As the API server answers a create: with its field manager's entry.
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "wrapup", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "events.k8s.io/v1", Time: &metav1.Time{Time: now.Time}, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:action":{},"f:eventTime":{},"f:note":{},"f:reason":{},"f:regarding":{},"f:reportingController":{},"f:reportingInstance":{},"f:type":{}}`)}}}},
		EventTime:           now,
		ReportingController: "wrapup",
		ReportingInstance:   "wrapup-controller-manager-6f7c9d-x2k4q",
		Action:              "Delete",
		Reason:              "Deleted",
		Regarding:           corev1.ObjectReference{Kind: "AppWrapper", Namespace: "tp-1-wrapup-0", Name: "bench-0", UID: "9d2f0b1e-0000-4000-8000-000000000002", APIVersion: "workload.codeflare.dev/v1beta2", ResourceVersion: "123400"},
		Note:                "rule throughput: trigger Job bench-0-trigger succeeded; AppWrapper deleted with its components",
		Type:                corev1.EventTypeNormal,
	}
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
		if !ok {
			b.Fatalf("no serializer for %s", mediaType)
		}
		enc := scheme.Codecs.EncoderForVersion(info.Serializer, eventsv1.SchemeGroupVersion)
		dec := scheme.Codecs.DecoderToVersion(info.Serializer, eventsv1.SchemeGroupVersion)
		body, err := runtime.Encode(enc, ev)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(mediaType, func(b *testing.B) {
			b.ReportAllocs()
			b.ReportMetric(float64(len(body)), "bytes")
			for b.Loop() {
				if _, err := runtime.Encode(enc, ev); err != nil {
					b.Fatal(err)
				}
				into := &eventsv1.Event{}
				if _, _, err := dec.Decode(body, nil, into); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
