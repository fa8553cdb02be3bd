package gc

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
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
	// id, when set, is the object's identity, kept apart from raw (which
	// then lacks apiVersion, kind and metadata): when no expression reads
	// the metadata, it is all of the metadata wrapup reads.
	id *triggerIdentity
}

// triggerIdentity is what wrapup reads of a trigger's metadata when no
// expression reads it (see identityOnly): its apiVersion and kind, its
// resourceVersion, its deletionTimestamp, its AppWrapper label and its
// controller reference. As fields, it takes a fraction of the JSON.
type triggerIdentity struct {
	apiVersion, kind string
	resourceVersion  string
	// deletionTimestamp is as the API server wrote it (RFC 3339), or "".
	deletionTimestamp string
	// label is the AppWrapper label's value; hasLabel says it is set.
	label    string
	hasLabel bool
	// controller is the controller ownerReference, if hasController.
	controller    metav1.OwnerReference
	hasController bool
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

// newIdentityTrigger keeps u, already trimmed to what is kept and to its
// identity (identityOnly), with that identity apart from the JSON. Of the
// ownerReferences only the controller's is kept: it is the only one read.
func newIdentityTrigger(u *unstructured.Unstructured) (*cachedTrigger, error) {
	in := cacheStrings
	id := &triggerIdentity{apiVersion: in.str(u.GetAPIVersion()), kind: in.str(u.GetKind()), resourceVersion: u.GetResourceVersion()}
	if ts, ok, _ := unstructured.NestedString(u.Object, "metadata", "deletionTimestamp"); ok {
		id.deletionTimestamp = ts
	}
	id.label, id.hasLabel = u.GetLabels()[awv1beta2.AppWrapperLabel]
	if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
		id.controller, id.hasController = *ref, true
		id.controller.APIVersion, id.controller.Kind = in.str(ref.APIVersion), in.str(ref.Kind)
		id.controller.Controller, id.controller.BlockOwnerDeletion = sharedBool(ref.Controller), sharedBool(ref.BlockOwnerDeletion)
	}
	t := &cachedTrigger{name: u.GetName(), namespace: in.str(u.GetNamespace()), uid: u.GetUID(), owner: owningAppWrapper(u), id: id}
	if id.controller.Name == t.owner {
		id.controller.Name = t.owner
	}
	if id.label == t.owner {
		id.label = t.owner
	}
	rest := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		switch k {
		case "apiVersion", "kind", "metadata":
		default:
			rest[k] = v
		}
	}
	raw, err := json.Marshal(rest)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	t.raw = raw
	return t, nil
}

var sharedTrue, sharedFalse = true, false

// sharedBool is a pointer to a bool of b's value that cached objects share.
func sharedBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &sharedTrue
	default:
		return &sharedFalse
	}
}

// object decodes the kept object into new maps, which the caller owns.
func (t *cachedTrigger) object() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if t.id == nil {
		if err := u.UnmarshalJSON(t.raw); err != nil {
			return nil, fmt.Errorf("decoding cached trigger %s/%s: %w", t.namespace, t.name, err)
		}
		return u, nil
	}
	// Without apiVersion and kind, as unstructured content (integers as
	// int64).
	if err := utiljson.Unmarshal(t.raw, &u.Object); err != nil {
		return nil, fmt.Errorf("decoding cached trigger %s/%s: %w", t.namespace, t.name, err)
	}
	{
		id := t.id
		u.Object["apiVersion"], u.Object["kind"] = id.apiVersion, id.kind
		md := map[string]any{"name": t.name, "namespace": t.namespace, "uid": string(t.uid), "resourceVersion": id.resourceVersion}
		if id.deletionTimestamp != "" {
			md["deletionTimestamp"] = id.deletionTimestamp
		}
		if id.hasLabel {
			md["labels"] = map[string]any{awv1beta2.AppWrapperLabel: id.label}
		}
		if id.hasController {
			c := id.controller
			ref := map[string]any{"apiVersion": c.APIVersion, "kind": c.Kind, "name": c.Name, "uid": string(c.UID), "controller": true}
			if c.BlockOwnerDeletion != nil {
				ref["blockOwnerDeletion"] = *c.BlockOwnerDeletion
			}
			md["ownerReferences"] = []any{ref}
		}
		u.Object["metadata"] = md
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
	if t.id != nil {
		id := *t.id
		id.controller = *t.id.controller.DeepCopy()
		c.id = &id
	}
	return &c
}
