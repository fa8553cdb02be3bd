// Package gc holds wrapup's controllers around one pure decision
// (gc/decision). Its rooms:
//
//   - appwrapper_controller.go: the AppWrapper controller (one completion,
//     below). The final check (decideFresh) comes before any write of the
//     run's CompletionRecord or delete, and the delete has UID and
//     resourceVersion preconditions.
//   - memory.go: what it remembers of each AppWrapper between reconciles,
//     one entry taken and settled once per reconcile, and the watch claims
//     it drops when the AppWrapper goes.
//   - observe.go: where that controller reads: the caches, and the trigger
//     informers it claims for each AppWrapper (gc/read gathers the rest).
//   - groupread.go: the final checks' consistent LISTs of the rules, each
//     sent at once up to 16 in flight, shared beyond (a group commit);
//     ownwrites.go: the watch events of wrapup's own deletes bring no
//     decision.
//   - startgate.go: at the start, that controller's workers wait for the
//     trigger kinds the rules name to list (bounded), so that each
//     AppWrapper is decided once on its trigger, not once more before.
//   - history_controller.go: removes CompletionRecords past their
//     retention, never one whose AppWrapper exists.
//   - rule_controller.go: each CompletionRule's status (compiled, its kind
//     served, watchable and cached, type checks) and its kind's informer;
//     counters.go the rules' outcome counters.
//   - workers.go: MultiKueue's worker clusters, each with its own trigger
//     informers.
//   - cache.go: what the manager's caches keep of AppWrappers, Workloads
//     and CompletionRecords.
//   - webhook.go: the rules' admission; setup.go wires it all; metrics.go,
//     rbac.go.
//
// Beside it: gc/decision (what to do, pure; its Events, each reason with
// its message, in events.go), gc/read (the read side: Gather, through the
// caches, the API server or a tool's reader), gc/triggers (the trigger
// informers) and gc/intern (the strings the caches share). What people are
// shown of a decision (Explain, the history) is kubectl-wrapup's, in
// cmd/kubectl-wrapup/view, made on the same read side and decision.
//
// One completion, from the trigger's watch event to the delete:
// triggers.Watches turns the Job's status update into an event for its
// AppWrapper; appWrapperReconciler.Reconcile gathers (read.Gather through
// cacheView) and decides (decision.Decide); remember keeps the failure
// clock and the Warnings said; decideFresh gathers again through liveViewAhead
// (the API server; the rules as groupread.go reads them) and decides
// again; act does that decision's steps in order: it creates the run's
// CompletionRecord, decides again on it as stored, mirrors the outcome on
// the AppWrapper's metadata unless it deletes it now, and deletes it
// (delete). The events of the delete bring no reconcile (ownEcho).
package gc
