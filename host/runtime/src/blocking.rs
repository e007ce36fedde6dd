//! Waiting inside a sandboxed call without holding up the async runtime.
//!
//! The host runs a plugin's short calls directly on a runtime worker thread (handing each call to
//! another thread costs more than the call; `host/src/reconcile/controller/worker.rs`). A call that
//! then waits (for a query's answer, for an instance of the pool) would keep that worker's other
//! tasks waiting too, and if every worker waited so, the task it waits for could never run.
//! Each wait in an import therefore goes through [`wait`], which hands the worker's other tasks to
//! another thread for as long as it waits (tokio's `block_in_place`), as the host does for a call
//! it expects to be long.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `f`, which blocks this thread, so that a multi-threaded runtime's worker thread it may
/// be running on goes on serving its other tasks from another thread meanwhile. Anywhere else
/// (a blocking-pool thread, a thread of no runtime, inside a `block_in_place` already) `f` just
/// runs; a current-thread runtime runs sandboxed calls on its blocking pool.
pub(crate) fn wait<R>(f: impl FnOnce() -> R) -> R {
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::wait;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_wait_on_the_only_worker_lets_the_task_it_waits_for_run() {
        let handle = tokio::runtime::Handle::current();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        // As a sandboxed call run in place waits for a query: the answering task needs a worker,
        // and the only one is the thread waiting here.
        let answer = wait(move || {
            handle.spawn(async move { tx.send(42).expect("receiver waits") });
            rx.recv_timeout(std::time::Duration::from_secs(10))
        });
        assert_eq!(answer, Ok(42));
    }

    #[test]
    fn outside_a_runtime_it_just_runs() {
        assert_eq!(wait(|| 7), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_a_current_thread_runtime_it_just_runs() {
        assert_eq!(wait(|| 7), 7);
    }
}
