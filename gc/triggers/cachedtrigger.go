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
	"k8s.io/client-go/tools/cache"

	"github.com/google/uuid"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"

	"github.com/wrapup-dev/wrapup/celpolicies"
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
	owner           string // the name of the AppWrapper that controls it
	raw             []byte
	// identity, when set (no expression reads the metadata), is all of
	// the metadata wrapup reads, kept apart from raw (which then lacks
	// apiVersion, kind and metadata): as fields, it takes a fraction of
	// the JSON.
	identity                             bool
	flags                                identityFlags
	apiVersion, kind                     string
	resourceVersion                      string
	controllerAPIVersion, controllerKind string
	controllerUID                        uuid.UUID
	// rare holds what few triggers carry: a deletionTimestamp, an
	// AppWrapper label other than the owner's name, a controller named
	// otherwise, a UID that is not a canonical UUID.
	rare *rareIdentity
}

// identityFlags say which optional parts of a trigger's identity are set;
// labelApart: the AppWrapper label's value (in rare, maybe "") is not the
// owner's name.
type identityFlags uint8

const (
	hasController identityFlags = 1 << iota
	hasBlockOwnerDeletion
	blockOwnerDeletion
	hasLabel
	labelApart
)

// rareIdentity is the part of a trigger's identity that few triggers have;
// a field set says that it differs from the common case (the owner's name,
// a canonical UUID).
type rareIdentity struct {
	deletionTimestamp, label, controllerName string
	uid, controllerUID                       string
}

// keepFields returns an informer transform that keeps what evaluations and
// the owner mapping need, as a *cachedTrigger: apiVersion, kind, the
// top-level fields in keep, and metadata: whole (without managedFields and
// the last-applied annotation) if keep has it, else only what identifies
// the object and its owner (identityOnly).
func keepFields(keep celpolicies.Fields) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // a *cachedTrigger already
		}
		keep.Keep(u.Object)
		if keep.Has("metadata") {
			return newCachedTrigger(StripMetadata(u), false)
		}
		return newCachedTrigger(identityOnly(u), true)
	}
}

// identityOnly trims the metadata of u to what wrapup reads when no
// expression reads it.
func identityOnly(u *unstructured.Unstructured) *unstructured.Unstructured {
	md, _ := u.Object["metadata"].(map[string]any)
	for k := range md {
		switch k {
		case "name", "namespace", "uid", "resourceVersion", "ownerReferences", "deletionTimestamp":
		case "labels":
			labels, _ := md[k].(map[string]any)
			if v, ok := labels[awv1beta2.AppWrapperLabel]; ok {
				md[k] = map[string]any{awv1beta2.AppWrapperLabel: v}
			} else {
				delete(md, k)
			}
		default:
			delete(md, k)
		}
	}
	return u
}

// StripMetadata drops managedFields and the last-applied annotation, the
// largest parts of most objects' metadata, which no expression reads.
func StripMetadata(u *unstructured.Unstructured) *unstructured.Unstructured {
	u.SetManagedFields(nil)
	ann := u.GetAnnotations()
	if _, ok := ann["kubectl.kubernetes.io/last-applied-configuration"]; ok {
		delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
		u.SetAnnotations(ann)
	}
	return u
}

// owningAppWrapper is the AppWrapper that controls a component: its
// controller ownerReference, or failing that the AppWrapper label.
func owningAppWrapper(u *unstructured.Unstructured) string {
	for _, ref := range u.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "AppWrapper" &&
			schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).Group == awv1beta2.GroupVersion.Group {
			return ref.Name
		}
	}
	return u.GetLabels()[awv1beta2.AppWrapperLabel]
}

// newCachedTrigger encodes u, already trimmed to what is kept; with
// identity, u's metadata is kept apart from the JSON, and of its
// ownerReferences only the controller's, the only one read.
func newCachedTrigger(u *unstructured.Unstructured, identity bool) (*cachedTrigger, error) {
	kind, uid := u.GetKind(), u.GetUID()
	t := &cachedTrigger{name: u.GetName(), namespace: intern.Cache.Str(u.GetNamespace()), owner: owningAppWrapper(u), identity: identity}
	var rare rareIdentity
	var controllerUID types.UID
	if identity {
		controllerUID = t.takeIdentity(u, &rare)
	}
	t.uid, rare.uid = packUID(uid)
	t.controllerUID, rare.controllerUID = packUID(controllerUID)
	if rare != (rareIdentity{}) {
		t.rare = &rare
	}
	var err error
	if t.raw, err = json.Marshal(u.Object); err != nil {
		return nil, fmt.Errorf("encoding %s %s/%s: %w", kind, t.namespace, t.name, err)
	}
	return t, nil
}

// takeIdentity moves the identity of u (the transform's own) into t and
// rare, and returns its controller's UID.
func (t *cachedTrigger) takeIdentity(u *unstructured.Unstructured, rare *rareIdentity) (controllerUID types.UID) {
	in := intern.Cache
	t.apiVersion, t.kind, t.resourceVersion = in.Str(u.GetAPIVersion()), in.Str(u.GetKind()), u.GetResourceVersion()
	rare.deletionTimestamp, _, _ = unstructured.NestedString(u.Object, "metadata", "deletionTimestamp")
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
	delete(u.Object, "apiVersion")
	delete(u.Object, "kind")
	delete(u.Object, "metadata")
	return controllerUID
}

// packUID keeps s as its 16 bytes if it is a UUID in canonical form (as
// the API server makes UIDs), else as other; uidOf undoes it.
func packUID(s types.UID) (uuid.UUID, string) {
	if u, err := uuid.Parse(string(s)); err == nil && u != uuid.Nil && u.String() == string(s) {
		return u, ""
	}
	return uuid.Nil, string(s)
}

func uidOf(u uuid.UUID, other string) types.UID {
	if other != "" || u == uuid.Nil {
		return types.UID(other)
	}
	return types.UID(u.String())
}

func (t *cachedTrigger) rareOrNone() (r rareIdentity) {
	if t.rare != nil {
		r = *t.rare
	}
	return r
}

// object decodes the kept object into new maps, which the caller owns.
func (t *cachedTrigger) object() (*unstructured.Unstructured, error) {
	// As unstructured content (integers as int64), as UnmarshalJSON does,
	// which would refuse the identity form: without apiVersion and kind.
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(t.raw, &u.Object); err != nil {
		return nil, fmt.Errorf("decoding cached trigger %s/%s: %w", t.namespace, t.name, err)
	}
	if !t.identity {
		return u, nil
	}
	u.Object["apiVersion"], u.Object["kind"] = t.apiVersion, t.kind
	rare := t.rareOrNone()
	md := map[string]any{"name": t.name, "namespace": t.namespace}
	if uid := t.getUID(); uid != "" {
		md["uid"] = string(uid)
	}
	if t.resourceVersion != "" {
		md["resourceVersion"] = t.resourceVersion
	}
	if rare.deletionTimestamp != "" {
		md["deletionTimestamp"] = rare.deletionTimestamp
	}
	if label := t.owner; t.flags&hasLabel != 0 {
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
		ref := map[string]any{"apiVersion": t.controllerAPIVersion, "kind": t.controllerKind, "name": name,
			"uid": string(uidOf(t.controllerUID, rare.controllerUID)), "controller": true}
		if t.flags&hasBlockOwnerDeletion != 0 {
			ref["blockOwnerDeletion"] = t.flags&blockOwnerDeletion != 0
		}
		md["ownerReferences"] = []any{ref}
	}
	u.Object["metadata"] = md
	return u, nil
}

// GetObjectMeta implements metav1.ObjectMetaAccessor, for the store's keys.
func (t *cachedTrigger) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: t.name, Namespace: t.namespace, UID: t.getUID()}
}

func (t *cachedTrigger) getUID() types.UID { return uidOf(t.uid, t.rareOrNone().uid) }

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
