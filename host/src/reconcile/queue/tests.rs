use super::*;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

type Q = Queue<&'static str>;

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// A key that is ready now (or within 1 ms of virtual time), if any.
async fn try_get<K: Clone + Eq + Hash + Send + 'static>(q: &Queue<K>) -> Option<K> {
    tokio::time::timeout(MS, q.get()).await.ok().flatten()
}

/// Hands out every ready key in order, calling `done` for each.
async fn take_all(q: &Q) -> Vec<&'static str> {
    let mut keys = Vec::new();
    while let Some(key) = try_get(q).await {
        q.done(&key);
        keys.push(key);
    }
    keys
}

/// The output of a spawned task; fails instead of hanging if it never finishes.
async fn join<T>(task: tokio::task::JoinHandle<T>) -> T {
    let joined = tokio::time::timeout(60 * SEC, task).await;
    joined.expect("task hung").expect("task panicked")
}

/// Lets spawned tasks run up to their next wait without advancing virtual time.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[test]
fn queue_is_send_sync_and_cheap_to_clone() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<Queue<String>>();
}

// 1. Dedup while queued.

#[tokio::test(start_paused = true)]
async fn adding_a_queued_key_does_not_queue_it_twice() {
    let q = Q::default();
    q.add("a");
    q.add("a");
    q.add("b");
    q.add("a");
    assert_eq!(q.len(), 2);
    assert_eq!(take_all(&q).await, ["a", "b"]);
    assert_eq!(q.stats().adds_total, 2);
}

// 2. Never two workers on one key.

#[tokio::test(start_paused = true)]
async fn a_key_in_flight_is_not_handed_out_again_until_done() {
    let q = Q::default();
    q.add("a");
    assert_eq!(try_get(&q).await, Some("a"));
    q.add("a");
    q.add("b");
    assert_eq!(
        q.len(),
        1,
        "the re-added key must not be ready while in flight"
    );
    assert_eq!(try_get(&q).await, Some("b"));
    assert_eq!(try_get(&q).await, None, "a is still in flight");
    q.done(&"a");
    assert_eq!(try_get(&q).await, Some("a"));
}

// 3. Re-add while processing runs again after, exactly once.

#[tokio::test(start_paused = true)]
async fn re_adds_while_processing_run_exactly_once_more() {
    let q = Q::default();
    q.add("a");
    assert_eq!(try_get(&q).await, Some("a"));
    for _ in 0..5 {
        q.add("a");
    }
    q.done(&"a");
    assert_eq!(take_all(&q).await, ["a"]);
}

#[tokio::test(start_paused = true)]
async fn a_key_changed_while_processed_runs_next_ahead_of_keys_queued_meanwhile() {
    let q = Q::default();
    q.add("a");
    q.add_low("l");
    assert_eq!(try_get(&q).await, Some("a"));
    q.add("b");
    q.add("a");
    q.add("c");
    q.done(&"a");
    // Ahead of b and c, which came first; still behind nothing of a higher priority.
    assert_eq!(take_all(&q).await, ["a", "b", "c", "l"]);

    // A low-priority follow-up is first among low keys, after every normal one.
    q.add_low("l1");
    q.add_low("l2");
    assert_eq!(try_get(&q).await, Some("l1"));
    q.add_low("l3");
    q.add("n");
    q.add_low("l1");
    q.done(&"l1");
    assert_eq!(take_all(&q).await, ["n", "l1", "l2", "l3"]);
}

#[tokio::test(start_paused = true)]
async fn a_follow_up_changed_again_while_processed_joins_the_back() {
    let q = Q::default();
    q.add("a");
    assert_eq!(try_get(&q).await, Some("a"));
    q.add("a");
    q.add("b");
    q.done(&"a");
    assert_eq!(try_get(&q).await, Some("a"), "the follow-up comes first");
    q.add("a");
    q.add("c");
    q.done(&"a");
    assert_eq!(take_all(&q).await, ["b", "c", "a"]);
    // Back in line, it earns one follow-up again.
    q.add("a");
    q.add("d");
    assert_eq!(try_get(&q).await, Some("a"));
    q.add("e");
    q.add("a");
    q.done(&"a");
    assert_eq!(take_all(&q).await, ["a", "d", "e"]);
}

#[tokio::test(start_paused = true)]
async fn done_without_a_re_add_does_not_requeue() {
    let q = Q::default();
    q.add("a");
    assert_eq!(try_get(&q).await, Some("a"));
    q.done(&"a");
    q.done(&"a");
    assert_eq!(try_get(&q).await, None);
    assert_eq!(q.stats().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_worker_is_woken_by_add_and_by_done() {
    let q = Q::default();
    let waiter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    settle().await;
    q.add("a");
    assert_eq!(join(waiter).await, Some("a"));
    let waiter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    settle().await;
    q.add("a");
    settle().await;
    assert!(!waiter.is_finished(), "a is in flight, nothing is ready");
    q.done(&"a");
    assert_eq!(join(waiter).await, Some("a"));
}

// 4. Delayed adds, earliest wins.

#[tokio::test(start_paused = true)]
async fn add_after_hands_the_key_out_when_due() {
    let q = Q::default();
    let start = Instant::now();
    q.add_after("a", 3 * SEC);
    assert_eq!(q.len(), 0);
    assert_eq!(q.stats().scheduled, 1);
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(start.elapsed(), 3 * SEC);
}

#[tokio::test(start_paused = true)]
async fn the_earliest_delay_wins() {
    let q = Q::default();
    let start = Instant::now();
    q.add_after("a", 10 * SEC);
    q.add_after("a", SEC);
    q.add_after("a", 5 * SEC);
    assert_eq!(q.stats().scheduled, 1);
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(start.elapsed(), SEC);
    q.done(&"a");
    tokio::time::sleep(20 * SEC).await;
    assert_eq!(
        try_get(&q).await,
        None,
        "the later schedules were replaced, not kept"
    );
}

#[tokio::test(start_paused = true)]
async fn add_of_a_scheduled_key_makes_it_ready_now() {
    let q = Q::default();
    q.add_after("a", 3600 * SEC);
    q.add("a");
    assert_eq!(q.len(), 1);
    assert_eq!(q.stats().scheduled, 0);
    assert_eq!(take_all(&q).await, ["a"]);
    tokio::time::sleep(7200 * SEC).await;
    assert_eq!(try_get(&q).await, None, "the delayed add was cancelled");
}

#[tokio::test(start_paused = true)]
async fn add_after_of_a_ready_key_does_not_delay_it() {
    let q = Q::default();
    q.add("a");
    q.add_after("a", 3600 * SEC);
    assert_eq!(q.len(), 1);
    assert_eq!(q.stats().scheduled, 0);
    assert_eq!(take_all(&q).await, ["a"]);
}

#[tokio::test(start_paused = true)]
async fn a_key_due_while_in_flight_runs_after_done() {
    let q = Q::default();
    q.add("a");
    assert_eq!(try_get(&q).await, Some("a"));
    q.add_after("a", SEC);
    tokio::time::sleep(2 * SEC).await;
    assert_eq!(try_get(&q).await, None, "a is still in flight");
    q.done(&"a");
    assert_eq!(take_all(&q).await, ["a"]);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_worker_picks_up_an_earlier_deadline() {
    let q = Q::default();
    let start = Instant::now();
    q.add_after("late", 10 * SEC);
    let waiter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    settle().await;
    q.add_after("early", SEC);
    assert_eq!(join(waiter).await, Some("early"));
    assert_eq!(
        start.elapsed(),
        SEC,
        "the waiter slept towards the old deadline"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiter_passes_its_wake_up_on() {
    let q = Q::default();
    let first = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    settle().await;
    let second = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    settle().await;
    // The wake-up goes to the first waiter, which now sleeps until the key is due; the second
    // still waits without a deadline. Dropping the first must not leave the key stranded.
    q.add_after("a", SEC);
    settle().await;
    first.abort();
    assert_eq!(join(second).await, Some("a"));
}

// 5. Per-key exponential backoff.

#[tokio::test(start_paused = true)]
async fn rate_limited_adds_back_off_exponentially_per_key_until_forgotten() {
    let q = Q::default();
    let delays: Vec<_> = (0..4).map(|_| q.add_rate_limited("a")).collect();
    assert_eq!(delays, [5 * MS, 10 * MS, 20 * MS, 40 * MS]);
    assert_eq!(q.retries(&"a"), 4);
    assert_eq!(q.add_rate_limited("b"), 5 * MS, "counts are per key");
    q.forget(&"a");
    assert_eq!(q.retries(&"a"), 0);
    assert_eq!(q.add_rate_limited("a"), 5 * MS);
    assert_eq!(q.retries(&"b"), 1);
}

#[tokio::test(start_paused = true)]
async fn backoff_is_configurable_and_capped() {
    let q = Q::new(Config {
        base_backoff: SEC,
        max_backoff: 10 * SEC,
    });
    let delays: Vec<_> = (0..6).map(|_| q.add_rate_limited("a")).collect();
    assert_eq!(delays, [SEC, 2 * SEC, 4 * SEC, 8 * SEC, 10 * SEC, 10 * SEC]);

    let default = Config::default();
    assert_eq!(backoff(&default, 0), 5 * MS);
    assert_eq!(backoff(&default, 17), 655_360 * MS);
    assert_eq!(backoff(&default, 18), 1000 * SEC);
    for failures in [31, 32, 64, u32::MAX] {
        assert_eq!(
            backoff(&default, failures),
            1000 * SEC,
            "{failures} must not overflow"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_failing_key_is_retried_after_its_backoff() {
    let q = Q::default();
    q.add("a");
    let mut last = Instant::now();
    let mut gaps = Vec::new();
    for _ in 0..4 {
        assert_eq!(q.get().await, Some("a"));
        gaps.push(last.elapsed());
        last = Instant::now();
        q.add_rate_limited("a");
        q.done(&"a");
    }
    assert_eq!(gaps, [Duration::ZERO, 5 * MS, 10 * MS, 20 * MS]);
}

// 6. Terminal errors: the caller forgets and does not requeue.

#[tokio::test(start_paused = true)]
async fn a_key_forgotten_without_requeue_is_not_retried() {
    let q = Q::default();
    q.add("a");
    assert_eq!(q.get().await, Some("a"));
    q.add_rate_limited("a");
    q.done(&"a");
    assert_eq!(q.get().await, Some("a"));
    // Terminal error: what the worker loop in the module docs does.
    q.forget(&"a");
    q.done(&"a");
    assert_eq!(q.retries(&"a"), 0);
    tokio::time::sleep(2000 * SEC).await;
    assert_eq!(try_get(&q).await, None);
    assert_eq!(q.stats().scheduled, 0);
}

// 7. Priorities.

#[tokio::test(start_paused = true)]
async fn normal_keys_are_handed_out_before_low_ones() {
    let q = Q::default();
    q.add_low("l1");
    q.add_low("l2");
    q.add("n1");
    q.add_with("n2", Priority::Normal);
    q.add_with("l3", Priority::Low);
    assert_eq!(take_all(&q).await, ["n1", "n2", "l1", "l2", "l3"]);
}

#[tokio::test(start_paused = true)]
async fn a_low_key_added_at_normal_priority_is_promoted() {
    let q = Q::default();
    q.add_low("l1");
    q.add_low("l2");
    q.add("n1");
    q.add("l2");
    assert_eq!(q.len(), 3);
    assert_eq!(take_all(&q).await, ["n1", "l2", "l1"]);
}

#[tokio::test(start_paused = true)]
async fn a_normal_key_is_not_demoted_by_a_low_add() {
    let q = Q::default();
    q.add("a");
    q.add("b");
    q.add_low("a");
    assert_eq!(take_all(&q).await, ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn a_re_add_in_flight_keeps_the_highest_priority() {
    let q = Q::default();
    q.add("a");
    assert_eq!(try_get(&q).await, Some("a"));
    q.add_low("x");
    q.add_low("a");
    q.add("a");
    q.add_low("a");
    q.done(&"a");
    assert_eq!(take_all(&q).await, ["a", "x"]);
}

// 8. Shutdown.

#[tokio::test(start_paused = true)]
async fn shutdown_wakes_waiting_workers_with_none() {
    let q = Q::default();
    let start = Instant::now();
    q.add_after("later", 3600 * SEC);
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.get().await })
        })
        .collect();
    settle().await;
    q.shutdown();
    for waiter in waiters {
        assert_eq!(join(waiter).await, None);
    }
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "woken by the shutdown, not by a timer"
    );
}

#[tokio::test(start_paused = true)]
async fn nothing_is_handed_out_after_shutdown() {
    let q = Q::default();
    q.add("a");
    q.add_after("b", SEC);
    q.shutdown();
    assert!(q.is_shut_down());
    assert_eq!(q.get().await, None);
    q.add("c");
    q.add_low("d");
    q.add_after("e", SEC);
    assert_eq!(q.len(), 0);
    tokio::time::sleep(2 * SEC).await;
    assert_eq!(q.get().await, None);
    assert_eq!(q.stats().scheduled, 0);
}

#[tokio::test(start_paused = true)]
async fn in_flight_keys_finish_after_shutdown_and_drain_waits_for_them() {
    let q = Q::default();
    q.add("a");
    q.add("b");
    assert_eq!(try_get(&q).await, Some("a"));
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shutdown_with_drain().await }
    });
    settle().await;
    assert!(!drain.is_finished(), "a is still in flight");
    assert_eq!(q.get().await, None, "b must not be handed out any more");
    q.add("a");
    q.done(&"a");
    join(drain).await;
    assert_eq!(q.stats().in_flight, 0);
    assert_eq!(
        q.get().await,
        None,
        "the re-add during shutdown was dropped"
    );
    q.shutdown_with_drain().await;
}

// 9. Metrics.

#[tokio::test(start_paused = true)]
async fn len_counts_only_ready_keys() {
    let q = Q::default();
    assert!(q.is_empty());
    q.add("a");
    q.add("c");
    q.add_after("b", SEC);
    assert_eq!(try_get(&q).await, Some("a"));
    let stats = q.stats();
    assert_eq!((stats.depth, stats.scheduled, stats.in_flight), (1, 1, 1));
    assert_eq!(q.len(), 1);
    tokio::time::sleep(SEC).await;
    assert_eq!(q.len(), 2, "b became due");
}

#[derive(Default)]
struct Recorder {
    waited: Mutex<Vec<Duration>>,
    worked: Mutex<Vec<Duration>>,
}

impl Observer for Recorder {
    fn handed_out(&self, queue_latency: Duration) {
        self.waited.lock().unwrap().push(queue_latency);
    }

    fn finished(&self, work_duration: Duration) {
        self.worked.lock().unwrap().push(work_duration);
    }
}

#[tokio::test(start_paused = true)]
async fn stats_and_observer_report_adds_retries_and_latencies() {
    let recorder = Arc::new(Recorder::default());
    let q = Q::with_observer(Config::default(), recorder.clone());
    q.add("a");
    q.add("a");
    q.add_after("b", SEC);
    q.add_rate_limited("c");
    tokio::time::sleep(3 * SEC).await;
    for _ in 0..3 {
        assert!(q.get().await.is_some());
    }
    tokio::time::sleep(SEC).await;
    q.done(&"a");
    q.done(&"z");

    let stats = q.stats();
    assert_eq!(
        stats.adds_total, 3,
        "a once (deduplicated), b and c when due"
    );
    assert_eq!(stats.retries_total, 2);
    assert_eq!(stats.handed_out_total, 3);
    let waited = [3 * SEC, 3 * SEC - 5 * MS, 2 * SEC];
    assert_eq!(*recorder.waited.lock().unwrap(), waited);
    assert_eq!(stats.queue_latency_total, waited.iter().sum::<Duration>());
    assert_eq!(*recorder.worked.lock().unwrap(), [SEC]);
}

// Concurrency and scale.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_workers_never_overlap_on_a_key_and_see_the_last_add() {
    const KEYS: usize = 4;
    const ADDS: u64 = 10_000;
    let q = Queue::<usize>::default();
    let in_flight: Arc<[AtomicUsize; KEYS]> = Arc::default();
    let version: Arc<[AtomicU64; KEYS]> = Arc::default();
    let seen: Arc<[AtomicU64; KEYS]> = Arc::default();
    let overlaps = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));

    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (q, in_flight, version, seen) =
                (q.clone(), in_flight.clone(), version.clone(), seen.clone());
            let (overlaps, runs) = (overlaps.clone(), runs.clone());
            tokio::spawn(async move {
                while let Some(key) = q.get().await {
                    if in_flight[key].fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    runs.fetch_add(1, Ordering::SeqCst);
                    seen[key].fetch_max(version[key].load(Ordering::SeqCst), Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_micros(500)).await;
                    in_flight[key].fetch_sub(1, Ordering::SeqCst);
                    q.done(&key);
                }
            })
        })
        .collect();

    for burst in 0..ADDS / 100 {
        for i in 0..100 {
            let key = usize::try_from(burst * 100 + i).unwrap() % KEYS;
            version[key].fetch_add(1, Ordering::SeqCst);
            q.add(key);
        }
        tokio::task::yield_now().await;
    }

    let settled = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let stats = q.stats();
            let all_seen = (0..KEYS).all(|k| seen[k].load(Ordering::SeqCst) == ADDS / 4);
            if all_seen && stats.depth == 0 && stats.in_flight == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        settled.is_ok(),
        "the last add of some key was never processed"
    );
    q.shutdown();
    for worker in workers {
        join(worker).await;
    }
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two workers held one key"
    );
    let runs = runs.load(Ordering::SeqCst);
    assert!(
        runs <= 1000,
        "{runs} runs for {ADDS} adds: adds were not coalesced"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hammered_key_runs_about_once_per_processing_time() {
    let q = Q::default();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (q, in_flight) = (q.clone(), in_flight.clone());
            let (overlaps, runs) = (overlaps.clone(), runs.clone());
            tokio::spawn(async move {
                while let Some(key) = q.get().await {
                    if in_flight.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(10 * MS).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    q.done(&key);
                }
            })
        })
        .collect();
    // 10,000 adds over 100 ms; each run takes 10 ms.
    for i in 0..10_000 {
        q.add("a");
        if i % 100 == 99 {
            tokio::time::sleep(MS).await;
        }
    }
    tokio::time::sleep(SEC).await;
    q.shutdown();
    for worker in workers {
        join(worker).await;
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    let runs = runs.load(Ordering::SeqCst);
    assert!((10..=12).contains(&runs), "{runs} runs");
}

#[tokio::test(start_paused = true)]
async fn a_hundred_thousand_keys_go_through_in_order() {
    const N: u32 = 100_000;
    let q = Queue::<u32>::default();
    for key in 0..N {
        q.add_low(key);
    }
    for key in 0..N {
        q.add_after(N + key, Duration::from_millis(u64::from(key % 1000) + 1));
    }
    for key in (0..N).step_by(2) {
        q.add(key);
    }
    assert_eq!(q.len(), 100_000);
    let mut order = Vec::new();
    for _ in 0..2 * N {
        let key = q.get().await.unwrap();
        q.done(&key);
        order.push(key);
    }
    assert!(q.is_empty());
    assert_eq!(q.stats().scheduled, 0);
    // Promoted even keys first, then the odd (still low) ones, then delayed keys as they come
    // due, low keys never starving ready normal ones.
    assert!(order[..50_000].iter().all(|k| k % 2 == 0 && *k < N));
    assert!(order[50_000..100_000].iter().all(|k| k % 2 == 1 && *k < N));
    assert!(order[100_000..].iter().all(|k| *k >= N));
}
