// Package gc holds wrapup's controllers around one pure decision
// (gc/decision). Its rooms:
//
//   - appwrapper_controller.go: the AppWrapper controller. Reconcile
//     decides on the caches, remembers what the decision says to (one
//     memory entry per AppWrapper, taken and settled once per reconcile),
//     and, for a write, a CompletionRecord or a delete, decides again on
//     what the API server says (the final check) and applies that
//     decision's steps in order: the record patch, the CompletionRecord,
//     the delete with UID and resourceVersion preconditions.
//   - groupread.go: the final checks' consistent LISTs of the rules, each
//     sent at once up to 16 in flight, shared beyond (a group commit);
//     ownwrites.go: the watch events of wrapup's
//     own writes on the way to a delete, and of what it deleted, bring no
//     decision.
//   - startgate.go: at the start, that controller's workers wait for the
//     trigger kinds the rules name to list (bounded), so that each
//     AppWrapper is decided once on its trigger, not once more before.
//   - observe.go: where that controller reads: the caches, and the trigger
//     informers it claims for each AppWrapper (gc/view gathers the rest).
//   - history.go: the CompletionRecord writes. Which one is due, under
//     which retention, and when a deletion stops waiting for it is the
//     decision's step (decision.HistoryStep), on what the controller
//     remembers and caches of it (decision.HistoryInput);
//     history_controller.go removes records past their retention.
//   - rule_controller.go: each CompletionRule's status (compiled, its kind
//     served and watchable, type checks) and its kind's informer;
//     counters.go the rules' outcome counters.
//   - workers.go: MultiKueue's worker clusters, each with its own trigger
//     informers.
//   - cache.go: what the manager's caches keep of AppWrappers, Workloads
//     and CompletionRecords.
//   - webhook.go: the rules' admission; setup.go wires it all; metrics.go,
//     rbac.go.
//
// Beside it: gc/decision (what to do, pure; its Events, each reason with
// its message, in events.go), gc/view (the read side:
// Gather, Explain, the record rendering, shared with kubectl-wrapup),
// gc/triggers (the trigger informers) and gc/intern (the strings the
// caches share).
//
// One completion, from the trigger's watch event to the delete:
// triggers.Watches turns the Job's status update into an event for its
// AppWrapper; appWrapperReconciler.Reconcile gathers (view.Gather through
// cacheView) and decides (decision.Decide); remember keeps the failure
// clock and the Warnings said; decideFresh gathers again through liveView
// (the API server, the rules through a LIST of its own, or shared beyond
// 16 in flight); apply patches the
// record (write, writeRecord) and writes the CompletionRecord the
// decision's History step names (ensureHistory), decides again on the
// AppWrapper the patch returned, and deletes it (delete). The events of the patch and of the delete
// bring no reconcile (ownEcho).
package gc
