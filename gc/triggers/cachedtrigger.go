package triggers

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

	"github.com/wrapup-dev/wrapup/gc/intern"
)

// cachedTrigger is a trigger object as its informer keeps it: what the
// store's key and the owner mapping read, and the kept object
// (see keepFields) as JSON, decoded for each evaluation. Nested maps hold
// the same content in several times the memory (a map, its keys and boxed
// values per JSON object), and triggers are read only when they change.
type cachedTrigger struct {
	name, namespace string
	uid             uuid.UUID
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
	controllerUID                        uuid.UUID
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
	// labelApart: the AppWrapper label's value is not the owner's name,
	// and is in rare.
	labelApart
	otherUID
	otherControllerUID
)

// rareIdentity is the part of a trigger's identity that few triggers have.
type rareIdentity struct {
	deletionTimestamp string
	// label, when set, is the AppWrapper label's value, which is not the
	// owner's name; controllerName is the controller's name, which is not
	// the owner's.
	label, controllerName string
	// uid and controllerUID are UIDs that are not canonical UUIDs.
	uid, controllerUID string
}

// canonicalUID is s as its 16 bytes, if s is a UUID in canonical form
// (as the API server makes UIDs).
func canonicalUID(s types.UID) (uuid.UUID, bool) {
	u, err := uuid.Parse(string(s))
	return u, err == nil && u != uuid.Nil && u.String() == string(s)
}

// setUIDs keeps the trigger's UID and its controller's, as 16 bytes each
// or, in any other form, in rare.
func (t *cachedTrigger) setUIDs(uid, controller types.UID) {
	var ok bool
	if t.uid, ok = canonicalUID(uid); !ok && uid != "" {
		t.rareIdentity().uid, t.flags = string(uid), t.flags|otherUID
	}
	if t.controllerUID, ok = canonicalUID(controller); !ok && controller != "" {
		t.rareIdentity().controllerUID, t.flags = string(controller), t.flags|otherControllerUID
	}
}

func (t *cachedTrigger) rareIdentity() *rareIdentity {
	if t.rare == nil {
		t.rare = &rareIdentity{}
	}
	return t.rare
}

func (t *cachedTrigger) getUID() types.UID {
	if t.flags&otherUID != 0 {
		return types.UID(t.rare.uid)
	}
	return uidString(t.uid)
}

func (t *cachedTrigger) getControllerUID() types.UID {
	if t.flags&otherControllerUID != 0 {
		return types.UID(t.rare.controllerUID)
	}
	return uidString(t.controllerUID)
}

// uidString is u as a UID, "" for the nil UUID (no UID).
func uidString(u uuid.UUID) types.UID {
	if u == uuid.Nil {
		return ""
	}
	return types.UID(u.String())
}

// newCachedTrigger encodes u, already trimmed to what is kept.
func newCachedTrigger(u *unstructured.Unstructured) (*cachedTrigger, error) {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	t := &cachedTrigger{name: u.GetName(), namespace: intern.Cache.Str(u.GetNamespace()), owner: owningAppWrapper(u), raw: raw}
	t.setUIDs(u.GetUID(), "")
	return t, nil
}

// newIdentityTrigger keeps u, already trimmed to what is kept and to its
// identity (identityOnly), with that identity apart from the JSON. Of the
// ownerReferences only the controller's is kept: it is the only one read.
func newIdentityTrigger(u *unstructured.Unstructured) (*cachedTrigger, error) {
	in := intern.Cache
	t := &cachedTrigger{name: u.GetName(), namespace: in.Str(u.GetNamespace()), owner: owningAppWrapper(u),
		identity: true, apiVersion: in.Str(u.GetAPIVersion()), kind: in.Str(u.GetKind()), resourceVersion: u.GetResourceVersion()}
	var rare rareIdentity
	var controllerUID types.UID
	if ts, ok, _ := unstructured.NestedString(u.Object, "metadata", "deletionTimestamp"); ok {
		rare.deletionTimestamp = ts
	}
	if label, ok := u.GetLabels()[awv1beta2.AppWrapperLabel]; ok {
		t.flags |= hasLabel
		if label != t.owner {
			rare.label, t.flags = label, t.flags|labelApart
		}
	}
	if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
		t.flags |= hasController
		t.controllerAPIVersion, t.controllerKind, controllerUID = in.Str(ref.APIVersion), in.Str(ref.Kind), ref.UID
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
	t.setUIDs(u.GetUID(), controllerUID)
	// u is the transform's own: what the fields hold leaves the JSON.
	delete(u.Object, "apiVersion")
	delete(u.Object, "kind")
	delete(u.Object, "metadata")
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s/%s: %w", t.kind, t.namespace, t.name, err)
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
	md := map[string]any{"name": t.name, "namespace": t.namespace}
	if uid := t.getUID(); uid != "" {
		md["uid"] = string(uid)
	}
	if t.resourceVersion != "" {
		md["resourceVersion"] = t.resourceVersion
	}
	var rare rareIdentity
	if t.rare != nil {
		rare = *t.rare
	}
	if rare.deletionTimestamp != "" {
		md["deletionTimestamp"] = rare.deletionTimestamp
	}
	if t.flags&hasLabel != 0 {
		label := t.owner
		if t.flags&labelApart != 0 {
			label = rare.label
		}
		md["labels"] = map[string]any{awv1beta2.AppWrapperLabel: label}
	}
	if t.flags&hasController != 0 {
		name := t.owner
		if rare.controllerName != "" {
			name = rare.controllerName
		}
		ref := map[string]any{"apiVersion": t.controllerAPIVersion, "kind": t.controllerKind, "name": name, "uid": string(t.getControllerUID()), "controller": true}
		if t.flags&hasBlockOwnerDeletion != 0 {
			ref["blockOwnerDeletion"] = t.flags&blockOwnerDeletion != 0
		}
		md["ownerReferences"] = []any{ref}
	}
	u.Object["metadata"] = md
	return u, nil
}

// GetObjectMeta implements metav1.ObjectMetaAccessor, for the store's key
// function.
func (t *cachedTrigger) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: t.name, Namespace: t.namespace, UID: t.getUID()}
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
