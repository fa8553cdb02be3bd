package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// addingManager records what is added to it; it serves what
// rotator.AddRotator asks of a manager, and nothing else.
type addingManager struct {
	manager.Manager
	added []manager.Runnable
}

func (m *addingManager) Add(r manager.Runnable) error { m.added = append(m.added, r); return nil }
func (m *addingManager) GetConfig() *rest.Config      { return &rest.Config{Host: "https://127.0.0.1:1"} }
func (m *addingManager) GetScheme() *runtime.Scheme   { return clientgoscheme.Scheme }
func (m *addingManager) GetRESTMapper() meta.RESTMapper {
	return meta.NewDefaultRESTMapper(nil)
}
func (m *addingManager) GetClient() client.Client { return nil }

// TestEveryCertificatePartIsSoft: cert-controller adds a rotator, a
// namespaced cache and a controller. Each must reach the manager wrapped,
// so that none of them can stop it (the controller returns an error when
// its cache cannot sync, for instance without the Role that lets it list
// the Secret), and each in the group it asked for: every replica serves
// the webhook, leader or not.
func TestEveryCertificatePartIsSoft(t *testing.T) {
	m := &addingManager{}
	key := types.NamespacedName{Namespace: "wrapup-system", Name: "wrapup-webhook-server-cert"}
	err := rotator.AddRotator(bestEffort{Manager: m, secret: key, log: funcr.New(func(string, string) {}, funcr.Options{})}, &rotator.CertRotator{
		SecretKey: key, CertDir: t.TempDir(), CAName: "ca", CAOrganization: "o", DNSName: "svc",
		IsReady: make(chan struct{}), Webhooks: []rotator.WebhookInfo{{Type: rotator.Validating, Name: "vwc"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.added) < 3 {
		t.Fatalf("cert-controller added %d runnables, want its rotator, cache and controller", len(m.added))
	}
	for _, r := range m.added {
		s, ok := r.(soft)
		if !ok {
			t.Errorf("%T reached the manager unwrapped: its error would stop the manager", r)
			continue
		}
		if s.NeedLeaderElection() {
			t.Errorf("%T runs on the leader only; every replica serves the webhook", s.Runnable)
		}
	}
}

// TestSoftLogsTheFailure: a failing part is logged with what to check, and
// its error never reaches the manager; a part with no answer on leader
// election runs on the leader, as the manager would run it.
func TestSoftLogsTheFailure(t *testing.T) {
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	key := types.NamespacedName{Namespace: "ns", Name: "certs"}
	s := soft{Runnable: manager.RunnableFunc(func(context.Context) error { return errors.New("timed out waiting for cache to be synced") }), secret: key, log: log}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start returned %v: the manager would exit", err)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "timed out waiting for cache to be synced") || !strings.Contains(logged[0], "ns/certs") {
		t.Errorf("logged %q, want the error and the Secret to check", logged)
	}
	if !s.NeedLeaderElection() {
		t.Error("a runnable with no answer on leader election runs on every replica; the manager runs it on the leader only")
	}
	// A part stopped with the manager is not a failure.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	logged = nil
	_ = soft{Runnable: manager.RunnableFunc(func(ctx context.Context) error { return ctx.Err() }), log: log}.Start(ctx)
	if len(logged) != 0 {
		t.Errorf("logged %q when the manager stopped", logged)
	}
}
