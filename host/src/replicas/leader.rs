//! Leader election over a coordination.k8s.io/v1 Lease, so that several replicas of the host
//! can run and only one reconciles.
//!
//! The algorithm is client-go's `leaderelection` (which controller-runtime uses):
//! - a candidate tries every retry period (jittered) to take the Lease; it may when the Lease
//!   has no holder, or its record has not changed for the Lease's duration *as this candidate
//!   observed it* (local monotonic time, so clock skew between replicas does not matter);
//! - the leader renews every retry period; when no renewal succeeds within the renew deadline
//!   it stops acting. Since the renew deadline is shorter than the lease duration, it stops
//!   before any other candidate can take over;
//! - on shutdown the leader releases the Lease (no holder), so a candidate takes it at its next
//!   try instead of waiting for the Lease to expire.
//!
//! Written here rather than taken from a crate: `kube-lease-manager` models a lease as a
//! duration plus a grace period, judges expiry by wall clocks, and has no renew deadline, so it
//! cannot give controller-runtime's timings (lease 15 s, renew deadline 10 s, retry 2 s) or
//! the guarantee that a leader stops before its lease can pass on. `kube-coordinate` follows
//! kube's major version and has no release for kube 5 (0.2 needs kube <= 1, 2.0 is for kube 2);
//! neither offers a fence.
//!
//! What stops acting is a [`Fence`] (`wasmctrl-runtime`'s, since its `sql` import checks it
//! too): a deadline the renewals push forward through the elector's [`FenceKeeper`]. The
//! applier and the `sql` capability check it before every request they send for a plugin, so a
//! leader that cannot renew sends nothing once its renew deadline has passed, even if the
//! election task itself is starved.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
pub use wasmctrl_runtime::fence::{Fence, FenceKeeper};

/// How the Lease is named and timed.
#[derive(Debug, Clone)]
pub struct Config {
    /// The Lease's name (`--leader-election-id`).
    pub name: String,
    /// The Lease's namespace (`--leader-election-namespace`).
    pub namespace: String,
    /// This replica's identity, written as the Lease's holder.
    pub identity: String,
    /// How long a Lease whose record does not change stays held (controller-runtime: 15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps acting without a successful renewal (10 s).
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews (2 s).
    pub retry_period: Duration,
}

impl Config {
    /// controller-runtime's timings for a Lease `name` in `namespace`, held as `identity`.
    pub fn new(name: &str, namespace: &str, identity: String) -> Self {
        Self {
            name: name.to_string(),
            namespace: namespace.to_string(),
            identity,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Why these timings cannot work, if they cannot: as client-go, the leader must stop
    /// (renew deadline) before its Lease can pass on (lease duration), and must try more than
    /// once before it gives up.
    pub fn check(&self) -> Result<(), TimingError> {
        let (lease, renew, retry) = (self.lease_duration, self.renew_deadline, self.retry_period);
        if lease <= renew {
            return Err(TimingError::LeaseNotAfterRenew { lease, renew });
        }
        if renew.as_secs_f64() <= 1.2 * retry.as_secs_f64() {
            return Err(TimingError::RenewTooShortForRetries { renew, retry });
        }
        if lease.as_secs() < 1 || lease.as_secs() > i32::MAX as u64 {
            return Err(TimingError::LeaseSeconds(lease));
        }
        Ok(())
    }
}

/// Leader-election timings that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// The leader would not stop before its Lease can pass on.
    #[error("the lease duration ({lease:?}) must be longer than the renew deadline ({renew:?})")]
    LeaseNotAfterRenew {
        /// `--leader-elect-lease-duration`.
        lease: Duration,
        /// `--leader-elect-renew-deadline`.
        renew: Duration,
    },
    /// The leader would give up before trying to renew more than once.
    #[error(
        "the renew deadline ({renew:?}) must be longer than 1.2 x the retry period ({retry:?})"
    )]
    RenewTooShortForRetries {
        /// `--leader-elect-renew-deadline`.
        renew: Duration,
        /// `--leader-elect-retry-period`.
        retry: Duration,
    },
    /// A Lease holds whole seconds (`leaseDurationSeconds`, an int32).
    #[error("the lease duration ({0:?}) must be a whole number of seconds, at least 1")]
    LeaseSeconds(Duration),
}

/// This replica's identity: `<hostname>_<uuid>`, as controller-runtime's.
pub fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "wasmctrl".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// The namespace a Pod runs in, from its service account; `default` outside a cluster.
pub fn own_namespace() -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|ns| ns.trim().to_string())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".into())
}

/// What the host's workers and applier follow: whether this replica leads.
#[derive(Debug, Clone)]
pub struct Leadership {
    fence: Fence,
    leading: watch::Receiver<bool>,
}

impl Leadership {
    /// The only replica: always leading.
    pub fn sole() -> Self {
        let (tx, leading) = watch::channel(true);
        // Never changes: dropping the sender keeps `true` for every receiver.
        drop(tx);
        Self {
            fence: Fence::open(),
            leading,
        }
    }

    /// A replica that acts while `leading` says so and `fence` holds (shard membership's).
    pub(crate) fn from_parts(fence: Fence, leading: watch::Receiver<bool>) -> Self {
        Self { fence, leading }
    }

    /// The fence requests for plugins are checked against.
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// Whether this replica leads now.
    pub fn is_leading(&self) -> bool {
        *self.leading.borrow() && self.fence.holds()
    }

    /// Waits until this replica leads (at once if it does).
    pub async fn leading(&mut self) {
        if self.leading.wait_for(|leading| *leading).await.is_err() {
            // The election has ended (shutdown): this replica will not lead again, and its
            // workers wait for their stop signal instead.
            std::future::pending::<()>().await;
        }
    }

    /// Waits for the next change of leadership; `None` once the election has ended.
    pub async fn changed(&mut self) -> Option<bool> {
        self.leading.changed().await.ok()?;
        Some(*self.leading.borrow_and_update())
    }
}

/// A running election: [`resign`](Self::resign) ends it and releases the Lease.
pub struct Election {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Elector>,
}

/// Starts campaigning for the Lease `config` names. The [`Leadership`] says when this replica
/// leads.
pub fn campaign(client: kube::Client, config: Config) -> (Leadership, Election) {
    let (tx, leading) = watch::channel(false);
    let (keeper, fence) = FenceKeeper::closed();
    let elector = Elector {
        api: Api::namespaced(client, &config.namespace),
        config,
        fence: keeper,
        leading: tx,
        observed: None,
    };
    let stop = CancellationToken::new();
    let task = tokio::spawn(elector.run(stop.clone()));
    (Leadership { fence, leading }, Election { stop, task })
}

impl Election {
    /// Ends the campaign; if this replica leads, stops acting and releases the Lease so that
    /// another replica takes over at once. Call it once nothing is being reconciled any more.
    pub async fn resign(self) {
        self.stop.cancel();
        let Ok(mut elector) = self.task.await else {
            return;
        };
        if !elector.fence.holds() {
            return;
        }
        elector.fence.close();
        let _ = elector.leading.send(false);
        match elector.release().await {
            Ok(()) => tracing::info!(lease = %elector.lease_name(), "leader lease released"),
            Err(e) => {
                tracing::warn!(lease = %elector.lease_name(), error = %e, "could not release the leader lease; another replica takes over when it expires")
            }
        }
    }
}

/// The fields of a Lease that make up its record: any change means its holder is alive.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    holder: String,
    duration: Option<i32>,
    acquired: Option<MicroTime>,
    renewed: Option<MicroTime>,
    transitions: Option<i32>,
}

impl Record {
    fn of(spec: &LeaseSpec) -> Self {
        Self {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            duration: spec.lease_duration_seconds,
            acquired: spec.acquire_time.clone(),
            renewed: spec.renew_time.clone(),
            transitions: spec.lease_transitions,
        }
    }
}

struct Elector {
    api: Api<Lease>,
    config: Config,
    fence: FenceKeeper,
    leading: watch::Sender<bool>,
    /// The Lease's record as last seen, and when (this replica's clock).
    observed: Option<(Record, Instant)>,
}

/// Spreads candidates' tries (client-go's `JitterFactor` 1.2).
fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + rand::random::<f64>() * 0.2)
}

impl Elector {
    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    async fn run(mut self, stop: CancellationToken) -> Self {
        loop {
            tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "attempting to acquire the leader lease");
            if !self.acquire(&stop).await {
                return self;
            }
            tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "became leader; reconciling");
            let _ = self.leading.send(true);
            if !self.renew(&stop).await {
                return self;
            }
            // The fence has closed by itself; say so to the workers too, then campaign again.
            self.fence.close();
            let _ = self.leading.send(false);
            tracing::warn!(lease = %self.lease_name(), renew_deadline = ?self.config.renew_deadline, "leader lease lost: could not renew it in time; stopped reconciling");
        }
    }

    /// Tries until the Lease is ours (true) or `stop` (false).
    async fn acquire(&mut self, stop: &CancellationToken) -> bool {
        loop {
            let attempt = Instant::now();
            let tried = tokio::select! {
                () = stop.cancelled() => return false,
                tried = tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew()) => tried,
            };
            match tried {
                Ok(Ok(true)) => {
                    self.fence.extend_to(attempt + self.config.renew_deadline);
                    return true;
                }
                Ok(Ok(false)) => {}
                Ok(Err(e)) => {
                    tracing::info!(lease = %self.lease_name(), error = %e, "could not read or take the leader lease; retrying")
                }
                Err(_) => {
                    tracing::info!(lease = %self.lease_name(), "taking the leader lease timed out; retrying")
                }
            }
            // Try again after the retry period, or as soon as the holder's Lease runs out if
            // that is sooner: a standby takes over a dead leader's Lease without the extra
            // wait client-go can add.
            let mut wait = jittered(self.config.retry_period);
            if let Some(expiry) = self.others_expiry() {
                let left = expiry.saturating_duration_since(Instant::now());
                wait = wait.min(left + Duration::from_millis(20));
            }
            tokio::select! {
                () = stop.cancelled() => return false,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// When another holder's Lease, as last observed, runs out.
    fn others_expiry(&self) -> Option<Instant> {
        let (record, at) = self.observed.as_ref()?;
        if record.holder.is_empty() || record.holder == self.config.identity {
            return None;
        }
        let seconds = record.duration.unwrap_or(0).max(0) as u64;
        Some(*at + Duration::from_secs(seconds))
    }

    /// Renews every retry period while renewals succeed in time; false on `stop`, true once
    /// the renew deadline has passed without one (leadership lost).
    async fn renew(&mut self, stop: &CancellationToken) -> bool {
        loop {
            tokio::select! {
                () = stop.cancelled() => return false,
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
            let Some(deadline) = self.fence.deadline() else {
                return true;
            };
            let attempt = Instant::now();
            let left = deadline.saturating_duration_since(attempt);
            if left.is_zero() {
                return true;
            }
            let tried = tokio::select! {
                () = stop.cancelled() => return false,
                tried = tokio::time::timeout(left, self.try_acquire_or_renew()) => tried,
            };
            match tried {
                Ok(Ok(true)) => self.fence.extend_to(attempt + self.config.renew_deadline),
                // Another holder's record: ours was replaced, so the Lease has passed on.
                Ok(Ok(false)) if !self.holds_record() => return true,
                // Someone wrote the Lease in between (409): try again.
                Ok(Ok(false)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(lease = %self.lease_name(), error = %e, "could not renew the leader lease; retrying until the renew deadline")
                }
                Err(_) => return true,
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`: takes or renews the Lease when it is free, expired or
    /// ours. Ok(false) when another holder's Lease is still valid or someone wrote it first.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let duration = self.config.lease_duration.as_secs() as i32;
        let mine = |acquired: MicroTime, transitions: i32| LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(duration),
            acquire_time: Some(acquired),
            renew_time: Some(now.clone()),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        };
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(mine(now.clone(), 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created);
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let record = Record::of(&spec);
        if self
            .observed
            .as_ref()
            .is_none_or(|(seen, _)| *seen != record)
        {
            let new_holder = self
                .observed
                .as_ref()
                .is_none_or(|(seen, _)| seen.holder != record.holder);
            if new_holder && !record.holder.is_empty() && record.holder != self.config.identity {
                tracing::info!(lease = %self.lease_name(), leader = %record.holder, "another replica leads; standing by");
            }
            self.observed = Some((record.clone(), Instant::now()));
        }
        if self
            .others_expiry()
            .is_some_and(|expiry| Instant::now() < expiry)
        {
            return Ok(false);
        }
        let ours = record.holder == self.config.identity;
        let transitions = record.transitions.unwrap_or(0);
        lease.spec = Some(if ours {
            mine(record.acquired.unwrap_or_else(|| now.clone()), transitions)
        } else {
            mine(now.clone(), transitions + 1)
        });
        // The resourceVersion read above makes this a compare-and-swap: a replica that wrote
        // in between wins, and we get a 409.
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observe(&updated);
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether the record last seen names this replica as the holder.
    fn holds_record(&self) -> bool {
        (self.observed.as_ref()).is_some_and(|(record, _)| record.holder == self.config.identity)
    }

    fn observe(&mut self, lease: &Lease) {
        let record = Record::of(&lease.spec.clone().unwrap_or_default());
        self.observed = Some((record, Instant::now()));
    }

    /// client-go's release: no holder, a one-second duration, the transitions kept.
    async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: spec.lease_transitions,
            ..LeaseSpec::default()
        });
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_runtime_timings_are_accepted_and_inverted_ones_refused() {
        let config = Config::new("wasmctrl", "default", "me".into());
        assert_eq!(config.check(), Ok(()));
        let inverted = Config {
            renew_deadline: Duration::from_secs(20),
            ..config.clone()
        };
        assert!(matches!(
            inverted.check(),
            Err(TimingError::LeaseNotAfterRenew { .. })
        ));
        let no_retry = Config {
            retry_period: Duration::from_secs(9),
            ..config
        };
        let refused = no_retry.check().unwrap_err();
        assert!(refused.to_string().contains("retry period"), "{refused}");
    }

    #[test]
    fn identity_is_hostname_and_a_uuid() {
        let id = identity();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
        assert_ne!(identity(), id, "each start is a new identity");
    }
}
