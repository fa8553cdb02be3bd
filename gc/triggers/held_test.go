package triggers

import (
	"testing"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// held keeps each version (object UID, AppWrapper) of a trigger the store
// took until the controller was told it is gone, and its gone are the
// AppWrappers of those that a store lacks or holds as another object or
// another AppWrapper's.
func TestHeldGone(t *testing.T) {
	g := gomega.NewWithT(t)
	trigger := func(name string, uid types.UID, owner string) *cachedTrigger {
		tr := &cachedTrigger{namespace: "ns", name: name, owner: owner}
		tr.setUIDs(uid, "")
		return tr
	}
	const (
		uid1 = "7c3f2a1e-0d4b-4b8e-9f3a-2e6d5c4b3a21"
		uid2 = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	)
	h := newHeld()
	took := func(tr *cachedTrigger) *cachedTrigger { h.took(tr); return tr }
	took(trigger("kept", uid1, "a"))
	took(trigger("kept", uid1, "a")) // an update of the same object
	took(trigger("deleted", uid1, "b"))
	took(trigger("remade", uid1, "c"))
	took(trigger("remade", uid2, "c2")) // made again for another, not told yet
	took(trigger("other", uid2, "d"))
	h.told(took(trigger("told", uid1, "e")))
	older := took(trigger("again", uid1, "f"))
	took(trigger("again", uid2, "f"))
	h.told(older) // the older object's delete
	// Its AppWrapper changed and changed back, then told of the change:
	// the version back stays.
	flip := took(trigger("flip", uid1, "g"))
	took(trigger("flip", uid1, "g2"))
	took(trigger("flip", uid1, "g"))
	h.told(flip)
	took(trigger("nobody", uid1, ""))
	// UIDs not in canonical form (kept as strings) and none.
	took(trigger("odd", "ODD-1", "h"))
	took(trigger("odd", "ODD-1", "h"))
	took(trigger("odd", "", "h"))
	g.Expect(h.versions[types.NamespacedName{Namespace: "ns", Name: "odd"}]).To(gomega.HaveLen(1))
	h.told(h.versions[types.NamespacedName{Namespace: "ns", Name: "odd"}][0])
	g.Expect(h.versions).To(gomega.HaveLen(6), "one entry per name taken and not told gone")
	store := cache.NewStore(func(obj any) (string, error) {
		t := obj.(*cachedTrigger)
		return cache.NewObjectName(t.namespace, t.name).String(), nil
	})
	for _, tr := range []*cachedTrigger{trigger("kept", uid1, "a"), trigger("remade", uid2, "c2"), trigger("other", uid2, "x"), trigger("again", uid2, "f")} {
		g.Expect(store.Add(tr)).To(gomega.Succeed())
	}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	g.Expect(h.gone(store)).To(gomega.ConsistOf(key("b"), key("c"), key("d"), key("g"), key("g2")))
	g.Expect(gone([]*held{h, h}, store)).To(gomega.ConsistOf(key("b"), key("c"), key("d"), key("g"), key("g2")), "each AppWrapper once")
}
