package gc

// wrapup reads AppWrappers, Namespaces and trigger objects; it patches and
// deletes AppWrappers (and nothing else); it writes Events and its own rules'
// status. Read access to further trigger kinds is granted through the
// aggregated ClusterRole in config/rbac (label wrapup.dev/aggregate-to-trigger-kinds).

// +kubebuilder:rbac:groups=workload.codeflare.dev,resources=appwrappers,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=wrapup.dev,resources=completionrules,verbs=get;list;watch
// +kubebuilder:rbac:groups=wrapup.dev,resources=completionrules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=wrapup.dev,resources=completionrecords,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs;tfjobs;xgboostjobs;jaxjobs;paddlejobs;mpijobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=ray.io,resources=rayjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=argoproj.io,resources=workflows,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch.volcano.sh,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=sparkoperator.k8s.io,resources=sparkapplications,verbs=get;list;watch
// +kubebuilder:rbac:groups=tekton.dev,resources=pipelineruns;taskruns,verbs=get;list;watch
