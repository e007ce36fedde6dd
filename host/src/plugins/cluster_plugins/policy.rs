//! What the operator lets plugin resources ask for: the registries a tenant's `WasmPlugin` may
//! name (`--tenant-registries`), and the ceilings on what any resource sets for its plugin
//! (`--max-plugin-concurrency`, `--max-plugin-deadline`, `--max-plugin-memory`). A resource
//! asking more than a ceiling is served at the ceiling, and its status says so.

use std::time::Duration;

use crate::plugins::loader::PluginConfig;

/// The operator's rules for plugin resources.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Registries a `WasmPlugin` may name, as `host[:port]` or `host[:port]/path` (a
    /// repository prefix); none by default. `ClusterWasmPlugin`s may name any.
    pub tenant_registries: Vec<String>,
    /// Workers per plugin at most.
    pub max_concurrency: usize,
    /// One reconcile's deadline at most.
    pub max_deadline: Duration,
    /// One instance's memory at most, in MiB.
    pub max_memory_mib: usize,
    /// Every resource must name keys its plugin's signature verifies with.
    pub require_signatures: bool,
    /// Capabilities (`sql:<database>`) the operator grants tenants, as `(namespace,
    /// capability)`: a `WasmPlugin` in another namespace may not have them.
    pub tenant_capabilities: Vec<(String, String)>,
}

/// `--max-plugin-concurrency`'s default.
pub const MAX_CONCURRENCY: usize = 16;
/// `--max-plugin-deadline`'s default.
pub const MAX_DEADLINE: Duration = Duration::from_secs(30);
/// `--max-plugin-memory`'s default, in MiB.
pub const MAX_MEMORY_MIB: usize = 256;

impl Default for Policy {
    fn default() -> Self {
        Self {
            tenant_registries: Vec::new(),
            max_concurrency: MAX_CONCURRENCY,
            max_deadline: MAX_DEADLINE,
            max_memory_mib: MAX_MEMORY_MIB,
            require_signatures: false,
            tenant_capabilities: Vec::new(),
        }
    }
}

impl Policy {
    /// Whether a tenant may name the plugin at `registry`/`repository` (as the reference
    /// writes them): some entry names that registry and, if it has a path, the repository is
    /// that path or below it.
    pub fn tenant_may_pull(&self, registry: &str, repository: &str) -> bool {
        (self.tenant_registries.iter()).any(|entry| {
            let entry = entry.trim_end_matches('/');
            let (host, path) = entry.split_once('/').unwrap_or((entry, ""));
            host.eq_ignore_ascii_case(registry)
                && (path.is_empty()
                    || repository == path
                    || repository
                        .strip_prefix(path)
                        .is_some_and(|rest| rest.starts_with('/')))
        })
    }

    /// The capabilities of `declared` that the operator has not granted to tenants in
    /// `namespace` (`--tenant-capabilities <namespace>=<capability>`).
    pub fn ungranted<'a>(&self, namespace: &str, declared: &'a [String]) -> Vec<&'a str> {
        (declared.iter())
            .filter(|c| {
                !(self.tenant_capabilities.iter())
                    .any(|(ns, granted)| ns == namespace && granted == *c)
            })
            .map(String::as_str)
            .collect()
    }

    /// `config` within the ceilings, and a note for each value lowered.
    pub fn clamp(&self, mut config: PluginConfig) -> (PluginConfig, Vec<String>) {
        let mut notes = Vec::new();
        if let Some(asked) = config.concurrency.filter(|c| *c > self.max_concurrency) {
            config.concurrency = Some(self.max_concurrency);
            notes.push(format!(
                "concurrency {asked} lowered to {} (--max-plugin-concurrency)",
                self.max_concurrency
            ));
        }
        let max_ms = u64::try_from(self.max_deadline.as_millis()).unwrap_or(u64::MAX);
        if let Some(asked) = config.deadline_ms.filter(|d| *d > max_ms) {
            config.deadline_ms = Some(max_ms);
            notes.push(format!(
                "deadlineMs {asked} lowered to {max_ms} (--max-plugin-deadline)"
            ));
        }
        if let Some(asked) = config.memory_mib.filter(|m| *m > self.max_memory_mib) {
            config.memory_mib = Some(self.max_memory_mib);
            notes.push(format!(
                "memoryMiB {asked} lowered to {} (--max-plugin-memory)",
                self.max_memory_mib
            ));
        }
        (config, notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_may_name_only_the_listed_registries_and_repositories() {
        let policy = Policy {
            tenant_registries: vec![
                "registry.example.com/team-a".into(),
                "127.0.0.1:5000".into(),
            ],
            ..Policy::default()
        };
        assert!(policy.tenant_may_pull("registry.example.com", "team-a/vm"));
        assert!(policy.tenant_may_pull("registry.example.com", "team-a"));
        assert!(!policy.tenant_may_pull("registry.example.com", "team-ab/vm"));
        assert!(!policy.tenant_may_pull("registry.example.com", "team-b/vm"));
        assert!(policy.tenant_may_pull("127.0.0.1:5000", "anything/at/all"));
        assert!(!policy.tenant_may_pull("127.0.0.1:5001", "anything"));
        assert!(!policy.tenant_may_pull("evil.example.com", "team-a/vm"));
        assert!(!Policy::default().tenant_may_pull("registry.example.com", "team-a/vm"));
    }

    #[test]
    fn tenants_have_only_the_capabilities_granted_to_their_namespace() {
        let policy = Policy {
            tenant_capabilities: vec![("team-a".into(), "sql:students".into())],
            ..Policy::default()
        };
        let declared = ["sql:students".to_string(), "sql:billing".to_string()];
        assert_eq!(policy.ungranted("team-a", &declared), ["sql:billing"]);
        assert_eq!(
            policy.ungranted("team-b", &declared),
            ["sql:students", "sql:billing"]
        );
        assert!(policy.ungranted("team-a", &declared[..1]).is_empty());
    }

    #[test]
    fn what_exceeds_a_ceiling_is_lowered_to_it_and_said() {
        let config = PluginConfig {
            concurrency: Some(2_000_000_000),
            deadline_ms: Some(86_400_000),
            memory_mib: Some(64),
            ..PluginConfig::default()
        };
        let (clamped, notes) = Policy::default().clamp(config);
        assert_eq!(clamped.concurrency, Some(MAX_CONCURRENCY));
        assert_eq!(clamped.deadline_ms, Some(30_000));
        assert_eq!(clamped.memory_mib, Some(64));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("--max-plugin-concurrency"), "{notes:?}");
        let (_, none) = Policy::default().clamp(PluginConfig::default());
        assert!(none.is_empty());
    }
}
