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

	"github.com/google/uuid"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
)

// cachedTrigger is a trigger object as its informer keeps it: what the
// store's key and index and the owner mapping read, and the kept object
// (see keepFields) as JSON, decoded for each evaluation. Nested maps hold
// the same content in several times the memory (a map, its keys and boxed
// values per JSON object), and triggers are read only when they change.
type cachedTrigger struct {
	name, namespace string
	uid             compactUID
	// owner is the name of the AppWrapper that controls the object.
	owner string
	raw   []byte
	// identity, when set (no expression reads the metadata), is all of
	// the metadata wrapup reads, kept apart from raw (which then lacks
	// apiVersion, kind and metadata): as fields, it takes a fraction of
	// the JSON.
	identity bool
	// flags say which of the identity's optional parts are set.
	flags                                identityFlags
	apiVersion, kind                     string
	resourceVersion                      string
	controllerAPIVersion, controllerKind string
	controllerUID                        compactUID
	// rare holds what few triggers carry: a deletionTimestamp, an
	// AppWrapper label other than the owner's name, a controller named
	// otherwise.
	rare *rareIdentity
}

// identityFlags say which optional parts of a trigger's identity are set.
type identityFlags uint8

const (
	hasController identityFlags = 1 << iota
	hasBlockOwnerDeletion
	blockOwnerDeletion
	hasLabel
)

// rareIdentity is the part of a trigger's identity that few triggers have.
type rareIdentity struct {
	deletionTimestamp string
	// label, when set, is the AppWrapper label's value, which is not the
	// owner's name; controllerName is the controller's name, which is not
	// the owner's.
	label, controllerName string
}

// compactUID is a UID in canonical UUID form as its 16 bytes, or any other
// (rare, hand-made) UID as a string.
type compactUID struct {
	b     uuid.UUID
	other *string
}

func newCompactUID(s types.UID) compactUID {
	if s == "" {
		return compactUID{}
	}
	if u, err := uuid.Parse(string(s)); err == nil && u.String() == string(s) && u != uuid.Nil {
		return compactUID{b: u}
	}
	str := string(s)
	return compactUID{other: &str}
}

func (c compactUID) get() types.UID {
	switch {
	case c.other != nil:
		return types.UID(*c.other)
	case c.b == uuid.Nil:
		return ""
	default:
		return types.UID(c.b.String())
	}
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
	return &cachedTrigger{name: u.GetName(), namespace: cacheStrings.str(u.GetNamespace()), uid: newCompactUID(u.GetUID()), owner: owningAppWrapper(u), raw: raw}, nil
}

// newIdentityTrigger keeps u, already trimmed to what is kept and to its
// identity (identityOnly), with that identity apart from the JSON. Of the
// ownerReferences only the controller's is kept: it is the only one read.
func newIdentityTrigger(u *unstructured.Unstructured) (*cachedTrigger, error) {
	in := cacheStrings
	t := &cachedTrigger{name: u.GetName(), namespace: in.str(u.GetNamespace()), uid: newCompactUID(u.GetUID()), owner: owningAppWrapper(u),
		identity: true, apiVersion: in.str(u.GetAPIVersion()), kind: in.str(u.GetKind()), resourceVersion: u.GetResourceVersion()}
	rare := rareIdentity{}
	if ts, ok, _ := unstructured.NestedString(u.Object, "metadata", "deletionTimestamp"); ok {
		rare.deletionTimestamp = ts
	}
	if label, ok := u.GetLabels()[awv1beta2.AppWrapperLabel]; ok {
		t.flags |= hasLabel
		if label != t.owner {
			rare.label = label
		}
	}
	if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
		t.flags |= hasController
		t.controllerAPIVersion, t.controllerKind, t.controllerUID = in.str(ref.APIVersion), in.str(ref.Kind), newCompactUID(ref.UID)
		if ref.Name != t.owner {
			rare.controllerName = ref.Name
		}
		if ref.BlockOwnerDeletion != nil {
			t.flags |= hasBlockOwnerDeletion
			if *ref.BlockOwnerDeletion {
				t.flags |= blockOwnerDeletion
			}
		}
	}
	if rare != (rareIdentity{}) {
		t.rare = &rare
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

// object decodes the kept object into new maps, which the caller owns.
func (t *cachedTrigger) object() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if !t.identity {
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
	u.Object["apiVersion"], u.Object["kind"] = t.apiVersion, t.kind
	md := map[string]any{"name": t.name, "namespace": t.namespace, "uid": string(t.uid.get()), "resourceVersion": t.resourceVersion}
	var rare rareIdentity
	if t.rare != nil {
		rare = *t.rare
	}
	if rare.deletionTimestamp != "" {
		md["deletionTimestamp"] = rare.deletionTimestamp
	}
	if t.flags&hasLabel != 0 {
		label := t.owner
		if rare.label != "" {
			label = rare.label
		}
		md["labels"] = map[string]any{awv1beta2.AppWrapperLabel: label}
	}
	if t.flags&hasController != 0 {
		name := t.owner
		if rare.controllerName != "" {
			name = rare.controllerName
		}
		ref := map[string]any{"apiVersion": t.controllerAPIVersion, "kind": t.controllerKind, "name": name, "uid": string(t.controllerUID.get()), "controller": true}
		if t.flags&hasBlockOwnerDeletion != 0 {
			ref["blockOwnerDeletion"] = t.flags&blockOwnerDeletion != 0
		}
		md["ownerReferences"] = []any{ref}
	}
	u.Object["metadata"] = md
	return u, nil
}

// GetObjectMeta implements metav1.ObjectMetaAccessor, for the store's key
// and namespace index functions.
func (t *cachedTrigger) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: t.name, Namespace: t.namespace, UID: t.uid.get()}
}

// GetObjectKind implements runtime.Object.
func (t *cachedTrigger) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (t *cachedTrigger) DeepCopyObject() runtime.Object { return t.deepCopy() }

func (t *cachedTrigger) deepCopy() *cachedTrigger {
	c := *t
	c.raw = append([]byte(nil), t.raw...)
	if t.rare != nil {
		rare := *t.rare
		c.rare = &rare
	}
	return &c
}
