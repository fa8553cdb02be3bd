package triggers

import (
	"testing"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// told forgets a trigger when told of its delete (not of an older
// object's of its name), and its gone are the AppWrappers of what it was
// told of that a store lacks or holds as another object or another
// AppWrapper's.
func TestToldGone(t *testing.T) {
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
	tl := newTold()
	tl.present(trigger("kept", uid1, "a"))
	tl.present(trigger("deleted", uid1, "b"))
	tl.present(trigger("remade", uid1, "c"))
	tl.present(trigger("other", uid2, "d"))
	tl.present(trigger("told", uid1, "e"))
	tl.deleted(trigger("told", uid1, "e"))
	tl.present(trigger("again", uid1, "f"))
	tl.present(trigger("again", uid2, "f2"))
	tl.deleted(trigger("again", uid1, "f")) // the older object's delete
	store := cache.NewStore(func(obj any) (string, error) {
		t := obj.(*cachedTrigger)
		return cache.NewObjectName(t.namespace, t.name).String(), nil
	})
	for _, tr := range []*cachedTrigger{trigger("kept", uid1, "a"), trigger("remade", uid2, "c"), trigger("other", uid2, "x"), trigger("again", uid2, "f2")} {
		g.Expect(store.Add(tr)).To(gomega.Succeed())
	}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	g.Expect(tl.gone(store)).To(gomega.ConsistOf(key("b"), key("c"), key("d")))
}
