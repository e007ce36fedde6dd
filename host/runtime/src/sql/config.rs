//! Which databases the operator grants: `--sql <name>=<connection>` on the command line, or a
//! TOML file (`--sql-config`) whose entries may take the password from an environment variable
//! or a mounted secret file, so it never has to appear in a command line or a manifest.
//!
//! ```toml
//! [students]
//! url = "postgresql://writer@db.internal:5432/school"
//! password_file = "/var/run/secrets/students/password"   # or password_env = "STUDENTS_PASSWORD"
//! max_connections = 8
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

/// Connections per database unless its config says otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 8;

/// One database as the operator configured it, password resolved.
#[derive(Clone)]
pub struct Database {
    /// The name plugins use (`sql:<name>`).
    pub name: String,
    /// Parsed connection settings (a `postgresql://` URL or `key=value` pairs).
    pub connection: tokio_postgres::Config,
    /// Pool size.
    pub max_connections: usize,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the connection config: it may hold the password.
        f.debug_struct("Database")
            .field("name", &self.name)
            .field("target", &self.target())
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

impl Database {
    /// `user@host:port/dbname`, for logs: everything but the password.
    pub fn target(&self) -> String {
        let c = &self.connection;
        let host = c
            .get_hosts()
            .first()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .unwrap_or_else(|| "localhost".into());
        let port = c.get_ports().first().copied().unwrap_or(5432);
        format!(
            "{}@{host}:{port}/{}",
            c.get_user().unwrap_or("?"),
            c.get_dbname().unwrap_or("?")
        )
    }
}

/// A database grant that could not be understood.
#[derive(Debug, thiserror::Error)]
#[error("sql database {name:?}: {reason}")]
pub struct ConfigError {
    /// The database name (or the flag, when no name could be read).
    pub name: String,
    /// What is wrong.
    pub reason: String,
}

fn fail(name: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// Database names are what manifests write after `sql:`; keep them plain.
fn check_name(name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(fail(
            name,
            "names are 1-63 lowercase letters, digits, '-' or '_'",
        ))
    }
}

fn parse_connection(name: &str, text: &str) -> Result<tokio_postgres::Config, ConfigError> {
    let mut config = tokio_postgres::Config::from_str(text)
        .map_err(|e| fail(name, format!("invalid connection string: {e}")))?;
    if config.get_application_name().is_none() {
        config.application_name("wasmctrl");
    }
    Ok(config)
}

/// Parses one `--sql <name>=<connection>` flag.
pub fn parse_flag(flag: &str) -> Result<Database, ConfigError> {
    let Some((name, connection)) = flag.split_once('=') else {
        return Err(fail(
            flag,
            "expected <name>=<connection string>, e.g. students=postgresql://user@host/db",
        ));
    };
    check_name(name)?;
    Ok(Database {
        name: name.to_string(),
        connection: parse_connection(name, connection)?,
        max_connections: DEFAULT_MAX_CONNECTIONS,
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    url: String,
    password_env: Option<String>,
    password_file: Option<PathBuf>,
    max_connections: Option<usize>,
}

/// Parses a `--sql-config` file's text; `path` names it in errors and relative password files
/// are resolved from its directory.
pub fn parse_file(path: &Path, text: &str) -> Result<Vec<Database>, ConfigError> {
    let file = path.display().to_string();
    let entries: BTreeMap<String, Entry> =
        toml::from_str(text).map_err(|e| fail(&file, format!("{file}: {e}")))?;
    entries
        .into_iter()
        .map(|(name, entry)| {
            check_name(&name)?;
            let mut connection = parse_connection(&name, &entry.url)?;
            let password =
                match (&entry.password_env, &entry.password_file) {
                    (Some(_), Some(_)) => {
                        return Err(fail(&name, "set password_env or password_file, not both"));
                    }
                    (Some(var), None) => Some(std::env::var(var).map_err(|_| {
                        fail(&name, format!("environment variable {var} is not set"))
                    })?),
                    (None, Some(secret)) => {
                        let secret = path.parent().unwrap_or(Path::new(".")).join(secret);
                        let text = std::fs::read_to_string(&secret).map_err(|e| {
                            fail(&name, format!("password file {}: {e}", secret.display()))
                        })?;
                        // Secret files usually end with a newline the password does not have.
                        Some(text.trim_end_matches(['\n', '\r']).to_string())
                    }
                    (None, None) => None,
                };
            if let Some(password) = password {
                connection.password(password);
            }
            let max_connections = entry.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS);
            if max_connections == 0 {
                return Err(fail(&name, "max_connections must be at least 1"));
            }
            Ok(Database {
                name,
                connection,
                max_connections,
            })
        })
        .collect()
}

/// Reads a `--sql-config` file.
pub fn read_file(path: &Path) -> Result<Vec<Database>, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| fail(&path.display().to_string(), e.to_string()))?;
    parse_file(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_take_urls_and_key_value_strings() {
        let db = parse_flag("students=postgresql://writer:s3cret@127.0.0.1:5433/school").unwrap();
        assert_eq!(db.name, "students");
        assert_eq!(db.target(), "writer@127.0.0.1:5433/school");
        assert!(!format!("{db:?}").contains("s3cret"));
        let db = parse_flag("a_b=host=/tmp/pg port=5999 user=x dbname=y").unwrap();
        assert_eq!(db.target(), "x@/tmp/pg:5999/y");
        assert!(parse_flag("students").is_err());
        assert!(parse_flag("Students=host=x").is_err());
        assert!(parse_flag("s=postgresql://[bad").is_err());
    }

    #[test]
    fn files_read_passwords_from_secrets_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pw"), "from-file\n").unwrap();
        // Setting variables is unsafe in edition 2024 (other test threads read the environment),
        // so the test uses one that is never set and one that always is (PATH).
        let var = "WASMCTRL_SQL_CONFIG_TEST_UNSET";
        let text = format!(
            "[a]\nurl = \"postgresql://u@h/d\"\npassword_file = \"pw\"\nmax_connections = 2\n\
             [b]\nurl = \"host=h user=u dbname=d\"\npassword_env = \"{var}\"\n"
        );
        let path = dir.path().join("sql.toml");
        let err = parse_file(&path, &text).unwrap_err();
        assert!(err.to_string().contains(var), "{err}");
        let text = text.replace(var, "PATH");
        let dbs = parse_file(&path, &text).unwrap();
        assert_eq!(dbs.len(), 2);
        assert_eq!(dbs[0].connection.get_password(), Some(&b"from-file"[..]));
        assert_eq!(dbs[0].max_connections, 2);
        assert_eq!(
            dbs[1].connection.get_password(),
            Some(std::env::var("PATH").unwrap().as_bytes())
        );
        assert_eq!(dbs[1].max_connections, DEFAULT_MAX_CONNECTIONS);
    }

    #[test]
    fn file_mistakes_name_the_database() {
        let path = Path::new("/etc/wasmctrl/sql.toml");
        let both = "[a]\nurl = \"host=h\"\npassword_env = \"X\"\npassword_file = \"y\"\n";
        assert!(
            parse_file(path, both)
                .unwrap_err()
                .to_string()
                .contains("not both")
        );
        let typo = "[a]\nurl = \"host=h\"\npasword_env = \"X\"\n";
        assert!(
            parse_file(path, typo)
                .unwrap_err()
                .to_string()
                .contains("pasword_env")
        );
        let zero = "[a]\nurl = \"host=h\"\nmax_connections = 0\n";
        assert!(parse_file(path, zero).is_err());
    }
}
