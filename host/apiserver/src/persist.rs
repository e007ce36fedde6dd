//! Optional persistence in a data directory: an append-only log of JSON lines, fsynced per
//! acknowledged write, compacted into a fresh log at start-up.
//!
//! A crash can tear only the last line; loading stops at the first line that does not parse
//! (or lacks its newline), truncates the file there, and so never loads a half-written object.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::catalog::ResKey;

/// One log record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Record {
    /// Object created or replaced.
    Put {
        /// Resource `(group, plural)`.
        key: ResKey,
        /// The stored object.
        obj: Value,
    },
    /// Object removed.
    Delete {
        /// Resource `(group, plural)`.
        key: ResKey,
        /// Namespace (`""` if cluster-scoped).
        namespace: String,
        /// Name.
        name: String,
        /// resourceVersion of the deletion.
        rv: u64,
    },
    /// The resourceVersion counter at compaction (deletions leave no object to carry it).
    Mark {
        /// Last assigned resourceVersion.
        rv: u64,
    },
}

/// The open log file.
#[derive(Debug)]
pub struct Log {
    file: File,
    path: PathBuf,
    /// Bytes of whole records in the file: where the next append starts.
    len: u64,
    /// An append failed and its partial line could not be cut off: later appends would follow
    /// a torn line, and loading stops at the first one, losing them. Refuse them instead.
    broken: bool,
}

const FILE: &str = "objects.log";

impl Log {
    /// Opens (creating) the log in `dir` and returns the records that loaded cleanly.
    pub fn open(dir: &Path) -> std::io::Result<(Self, Vec<Record>)> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE);
        let mut records = Vec::new();
        let mut good_len = 0u64;
        if let Ok(f) = File::open(&path) {
            let mut reader = BufReader::new(f);
            let mut line = Vec::new();
            loop {
                line.clear();
                let n = reader.read_until(b'\n', &mut line)?;
                if n == 0 || line.last() != Some(&b'\n') {
                    break;
                }
                match serde_json::from_slice::<Record>(&line) {
                    Ok(r) => {
                        records.push(r);
                        good_len += n as u64;
                    }
                    Err(_) => break,
                }
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&path)?;
        // Drop a torn tail so later appends start on a clean line.
        if file.metadata()?.len() != good_len {
            file.set_len(good_len)?;
            file.sync_all()?;
        }
        let log = Self {
            file,
            path,
            len: good_len,
            broken: false,
        };
        Ok((log, records))
    }

    /// Appends one record and waits until it is on disk. A failed append (disk full) is cut back
    /// off the file, so the records acknowledged after it still load after a restart.
    pub fn append(&mut self, rec: &Record) -> std::io::Result<()> {
        if self.broken {
            return Err(std::io::Error::other(
                "the data log could not be repaired after a failed write; restart the server",
            ));
        }
        let mut line = serde_json::to_vec(rec)?;
        line.push(b'\n');
        let written = self
            .file
            .write_all(&line)
            .and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                self.len += line.len() as u64;
                Ok(())
            }
            Err(e) => {
                if self.file.set_len(self.len).is_err() {
                    self.broken = true;
                }
                Err(e)
            }
        }
    }

    /// Replaces the log with `records` (write a temporary file, fsync, rename).
    pub fn rewrite(&mut self, records: &[Record]) -> std::io::Result<()> {
        let tmp = self.path.with_extension("tmp");
        let written;
        {
            let mut f = File::create(&tmp)?;
            let mut buf = Vec::new();
            for r in records {
                serde_json::to_writer(&mut buf, r)?;
                buf.push(b'\n');
            }
            f.write_all(&buf)?;
            f.sync_all()?;
            written = buf.len() as u64;
        }
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent()
            && let Ok(d) = File::open(dir)
        {
            let _ = d.sync_all();
        }
        self.file = OpenOptions::new()
            .append(true)
            .read(true)
            .open(&self.path)?;
        self.len = written;
        self.broken = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut log, recs) = Log::open(dir.path()).unwrap();
            assert!(recs.is_empty());
            let key = ("".to_string(), "configmaps".to_string());
            log.append(&Record::Put {
                key,
                obj: json!({"metadata": {"name": "a"}}),
            })
            .unwrap();
        }
        let path = dir.path().join(FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"op\":\"put\",\"key\":[\"\",\"config")
            .unwrap();
        drop(f);
        let (mut log, recs) = Log::open(dir.path()).unwrap();
        assert_eq!(recs.len(), 1);
        log.append(&Record::Delete {
            key: ("".into(), "configmaps".into()),
            namespace: "".into(),
            name: "a".into(),
            rv: 3,
        })
        .unwrap();
        let (_, recs) = Log::open(dir.path()).unwrap();
        assert_eq!(recs.len(), 2);
    }
}
