package gc

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// cachedTrigger is a trigger object as its informer keeps it: what the
// store's key and index and the owner mapping read, and the kept object
// (see keepFields) as JSON, decoded for each evaluation. Nested maps hold
// the same content in several times the memory (a map, its keys and boxed
// values per JSON object), and triggers are read only when they change.
type cachedTrigger struct {
	name, namespace string
	uid             types.UID
	// owner is the name of the AppWrapper that controls the object.
	owner string
	raw   []byte
}

var (
	_ runtime.Object            = (*cachedTrigger)(nil)
	_ metav1.ObjectMetaAccessor = (*cachedTrigger)(nil)
)

// newCachedTrigger encodes u, already trimmed to what is kept.
func newCachedTrigger(u *unstructured.Unstructured) (*cachedTrigger, error) {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return &cachedTrigger{name: u.GetName(), namespace: u.GetNamespace(), uid: u.GetUID(), owner: owningAppWrapper(u), raw: raw}, nil
}

// object decodes the kept object into new maps, which the caller owns.
func (t *cachedTrigger) object() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(t.raw); err != nil {
		return nil, fmt.Errorf("decoding cached trigger %s/%s: %w", t.namespace, t.name, err)
	}
	return u, nil
}

// GetObjectMeta implements metav1.ObjectMetaAccessor, for the store's key
// and namespace index functions.
func (t *cachedTrigger) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: t.name, Namespace: t.namespace, UID: t.uid}
}

// GetObjectKind implements runtime.Object.
func (t *cachedTrigger) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (t *cachedTrigger) DeepCopyObject() runtime.Object { return t.deepCopy() }

func (t *cachedTrigger) deepCopy() *cachedTrigger {
	c := *t
	c.raw = append([]byte(nil), t.raw...)
	return &c
}
