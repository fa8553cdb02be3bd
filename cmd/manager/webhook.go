package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/wrapup-dev/wrapup/gc"
)

// The webhook's certificate, when wrapup manages it: a Secret in its own
// namespace (the Role wrapup-webhook-certs), and the CA injected into its
// ValidatingWebhookConfiguration.

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=update,resourceNames=wrapup-validating-webhook-configuration

// Where the webhook's certificate comes from.
const (
	// certsSelf: wrapup generates a CA and a serving certificate, keeps
	// them in a Secret, rotates them and injects the CA into its webhook
	// configuration (cert-controller, as the AppWrapper controller does).
	certsSelf = "self"
	// certsExternal: another component (cert-manager) writes the Secret
	// and the CA; wrapup only serves what is mounted in the cert folder.
	certsExternal = "external"
)

// webhookOptions are the flags of the validating webhook, which rejects at
// admission a rule whose CEL does not compile.
type webhookOptions struct {
	enabled       bool
	certs         string
	port          int
	certDir       string
	secret        string
	service       string
	configuration string
	extraDNSNames string
}

func (o *webhookOptions) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.enabled, "enable-webhook", true,
		"Serve the validating webhook that rejects at admission a rule whose CEL does not compile (config/webhook). Without it, such a rule is stored and reported on its status; it never acts either way.")
	fs.StringVar(&o.certs, "webhook-cert-management", certsSelf,
		"Where the webhook's certificate comes from: self (wrapup generates and rotates it in --webhook-secret-name and injects its CA into --webhook-configuration-name), or external (another component, such as cert-manager, mounts tls.crt and tls.key in --webhook-cert-dir and injects the CA).")
	fs.IntVar(&o.port, "webhook-port", 9443, "Port the webhook serves on.")
	fs.StringVar(&o.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Folder of the webhook's tls.crt and tls.key (the Secret's volume).")
	fs.StringVar(&o.secret, "webhook-secret-name", "wrapup-webhook-server-cert", "Secret, in --namespace, of the webhook's certificate.")
	fs.StringVar(&o.service, "webhook-service-name", "wrapup-webhook-service", "Service, in --namespace, the API server reaches the webhook through: the certificate is for <service>.<namespace>.svc.")
	fs.StringVar(&o.configuration, "webhook-configuration-name", "wrapup-validating-webhook-configuration", "ValidatingWebhookConfiguration the CA is injected into.")
	fs.StringVar(&o.extraDNSNames, "webhook-extra-dns-names", "", "More DNS names for the certificate, comma-separated: when the API server reaches the webhook by a URL rather than through the Service.")
}

func (o *webhookOptions) check(namespace string) error {
	if !o.enabled {
		return nil
	}
	switch o.certs {
	case certsSelf:
		if namespace == "" {
			return fmt.Errorf("outside a pod, --webhook-cert-management=%s needs --namespace, where its Secret is; for a process on your machine, --enable-webhook=false", certsSelf)
		}
	case certsExternal:
	default:
		return fmt.Errorf("--webhook-cert-management=%q: want %s or %s", o.certs, certsSelf, certsExternal)
	}
	return nil
}

// setup serves the webhook on mgr once its certificate is there, and returns
// a channel closed then. The controllers do not wait for it.
func (o *webhookOptions) setup(ctx context.Context, mgr ctrl.Manager, namespace string, log logr.Logger) (<-chan struct{}, error) {
	ready := make(chan struct{})
	if !o.enabled {
		return ready, nil
	}
	certs := make(chan struct{})
	if o.certs == certsSelf {
		var extra []string
		for _, n := range strings.Split(o.extraDNSNames, ",") {
			if n = strings.TrimSpace(n); n != "" {
				extra = append(extra, n)
			}
		}
		key := types.NamespacedName{Namespace: namespace, Name: o.secret}
		if err := rotator.AddRotator(bestEffort{Manager: mgr, secret: key, log: log}, &rotator.CertRotator{
			SecretKey:      key,
			CertDir:        o.certDir,
			CAName:         "wrapup-ca",
			CAOrganization: "wrapup",
			DNSName:        fmt.Sprintf("%s.%s.svc", o.service, namespace),
			ExtraDNSNames:  extra,
			IsReady:        certs,
			Webhooks:       []rotator.WebhookInfo{{Type: rotator.Validating, Name: o.configuration}},
			// Every replica serves the webhook, leader or not.
			RequireLeaderElection: false,
		}); err != nil {
			return nil, fmt.Errorf("managing the webhook's certificate: %w", err)
		}
	} else {
		// Another component mounts the certificate: wait for it, as the
		// webhook server reads it when it starts.
		go o.awaitCertFiles(ctx, certs, log)
	}
	go func() {
		select {
		case <-certs:
		case <-ctx.Done():
			return
		}
		// The webhook server reads its certificate when it starts: it is
		// added to the manager only now.
		v, err := gc.NewRuleValidator(mgr)
		if err == nil {
			err = v.SetupWebhookWithManager(mgr)
		}
		if err != nil {
			log.Error(err, "Serving the webhook")
			return
		}
		log.Info("Serving the webhook", "port", o.port, "certificates", o.certs)
		close(ready)
	}()
	return ready, nil
}

// bestEffort adds cert-controller's rotator to the manager so that its
// failure (its Secret missing or unreadable, the certificate never mounted,
// the CA never injected) stops only the webhook, not the manager: the
// controllers go on finishing AppWrappers, the replica stays not Ready and
// says why, and rules are admitted unchecked meanwhile (failurePolicy
// Ignore). cert-controller would otherwise return the error from its
// runnable, and the manager would exit and restart in a loop.
//
// Its config also narrows what the rotator's cache lists and watches to the
// one Secret (a field selector on its name), so that wrapup may read that
// Secret only, not every Secret of its namespace.
type bestEffort struct {
	manager.Manager
	secret types.NamespacedName
	log    logr.Logger
}

func (m bestEffort) GetConfig() *rest.Config {
	cfg := rest.CopyConfig(m.Manager.GetConfig())
	secrets := "/api/v1/namespaces/" + m.secret.Namespace + "/secrets"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && req.URL.Path == secrets {
				req = req.Clone(req.Context())
				q := req.URL.Query()
				q.Set("fieldSelector", "metadata.name="+m.secret.Name)
				req.URL.RawQuery = q.Encode()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Add adds every part cert-controller adds (its rotator, its namespaced
// cache and its controller, which gives up when that cache cannot sync,
// for instance without the Role) as a soft runnable, in the group the part
// asked for.
func (m bestEffort) Add(r manager.Runnable) error {
	return m.Manager.Add(soft{Runnable: r, secret: m.secret, log: m.log})
}

// soft runs a part of the webhook's certificate management and logs its
// failure instead of returning it.
type soft struct {
	manager.Runnable
	secret types.NamespacedName
	log    logr.Logger
}

// NeedLeaderElection is the part's own answer; a runnable without one runs
// on the leader only, as the manager would run it.
func (s soft) NeedLeaderElection() bool {
	if le, ok := s.Runnable.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}

func (s soft) Start(ctx context.Context) error {
	if err := s.Runnable.Start(ctx); err != nil && ctx.Err() == nil {
		s.log.Error(err, "The webhook's certificate failed: the webhook stays off and this replica not Ready until the manager restarts; "+
			"the controllers go on, and rules are admitted unchecked (failurePolicy Ignore). Check the Secret "+s.secret.String()+
			", the webhook configuration and the Role wrapup-webhook-certs", "part", fmt.Sprintf("%T", s.Runnable))
	}
	return nil
}

// awaitCertFiles closes certs once tls.crt and tls.key are in the cert
// folder (--webhook-cert-management=external: cert-manager's Secret,
// projected by the kubelet). Until then the webhook is off, the replica is
// not Ready, and it says so every minute; the controllers run meanwhile.
func (o *webhookOptions) awaitCertFiles(ctx context.Context, certs chan<- struct{}, log logr.Logger) {
	files := []string{filepath.Join(o.certDir, "tls.crt"), filepath.Join(o.certDir, "tls.key")}
	last := time.Time{}
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(context.Context) (bool, error) {
		for _, f := range files {
			if _, err := os.Stat(f); err != nil {
				if time.Since(last) >= time.Minute {
					log.Info("Waiting for the webhook's certificate (another component writes it)", "file", f, "err", err.Error())
					last = time.Now()
				}
				return false, nil
			}
		}
		return true, nil
	})
	if err == nil {
		close(certs)
	}
}
