package framework

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	kueueconfig "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/admissionchecks/multikueue"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
)

// MultiKueueOptions tune the MultiKueue controllers of a manager cluster.
type MultiKueueOptions struct {
	// ConfigNamespace is where Kueue reads its MultiKueueCluster Secrets.
	ConfigNamespace string
	// WorkerLostTimeout is how long a worker may be unreachable before
	// MultiKueue evicts what it dispatched there (Kueue's default: 15m).
	WorkerLostTimeout time.Duration
	// GCInterval is how often MultiKueue removes leftovers from workers.
	GCInterval time.Duration
}

// SetupMultiKueueManager runs, in mgr, Kueue as on a MultiKueue manager
// cluster: its core controllers, scheduler and AppWrapper integration
// (SetupKueue), and the MultiKueue admission check's controllers with the
// AppWrapper adapter, wired as Kueue's own MultiKueue integration suite
// wires them.
func SetupMultiKueueManager(ctx context.Context, mgr ctrl.Manager, o MultiKueueOptions) error {
	if err := SetupKueue(ctx, mgr); err != nil {
		return err
	}
	if err := multikueue.SetupIndexer(ctx, mgr.GetFieldIndexer(), o.ConfigNamespace); err != nil {
		return fmt.Errorf("multikueue indexes: %w", err)
	}
	adapters, err := jobframework.GetMultiKueueAdapters(sets.New("workload.codeflare.dev/appwrapper"))
	if err != nil {
		return fmt.Errorf("multikueue adapters: %w", err)
	}
	opts := []multikueue.SetupOption{
		multikueue.WithAdapters(adapters),
		multikueue.WithDispatcherName(kueueconfig.MultiKueueDispatcherModeAllAtOnce),
		multikueue.WithEventsBatchPeriod(100 * time.Millisecond),
	}
	if o.WorkerLostTimeout > 0 {
		opts = append(opts, multikueue.WithWorkerLostTimeout(o.WorkerLostTimeout))
	}
	if o.GCInterval > 0 {
		opts = append(opts, multikueue.WithGCInterval(o.GCInterval))
	}
	if err := multikueue.SetupControllers(mgr, o.ConfigNamespace, opts...); err != nil {
		return fmt.Errorf("multikueue controllers: %w", err)
	}
	return nil
}

// Kubeconfig is a kubeconfig for cfg (an envtest admin config: its CA and
// client certificate), acting as the user impersonate when set.
func Kubeconfig(cfg *rest.Config, impersonate string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Impersonate: impersonate}
	kc.Contexts["context"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	kc.CurrentContext = "context"
	return clientcmd.Write(*kc)
}
