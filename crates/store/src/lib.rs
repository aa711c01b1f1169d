//! Durable files shared by `delta` and `dygram`.
//!
//! Everything that must survive a crash goes through this crate:
//!
//! * [`journal`]: append-only JSONL files, one complete line per `write`, `fsync`ed by default; a reader
//!   that returns every complete line and reports a torn last line instead of failing.
//! * [`atomic`]: whole-file replacement (temp file in the same directory, `fsync`, `rename`, `fsync` of
//!   the directory), so a reader sees either the old or the new content, never a mix.
//! * [`lock`]: a run lock (`File::try_lock`) held for a process lifetime, with holder diagnostics and a
//!   way to tell "busy" from "stale".
//! * [`runs`]: the storage seam the tools use for their runs — a journal with sequence numbers,
//!   documents, a lease with an epoch that fences stale writers, listing — and [`files`], its
//!   implementation on the local filesystem.
//! * [`ids`] and [`clock`]: id generation and validation, and a clock that tests can pin through an
//!   environment variable.
//!
//! The crate never prints; every failure is a [`StoreError`] that names the path involved.
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod atomic;
pub mod clock;
#[cfg(any(test, feature = "contract"))]
pub mod contract;
mod error;
pub mod files;
mod holder;
pub mod ids;
pub mod journal;
pub mod lock;
pub mod runs;

pub use atomic::{create_atomic, sync_dir, write_atomic, write_atomic_lazy, write_json_atomic};
pub use clock::Clock;
pub use error::{StoreError, StoreResult};
pub use files::{FileLayout, FileStore};
pub use ids::{IdSource, timestamp_id, validate_id};
pub use journal::{Durability, Journal, JournalContents, TornReason, TornTail};
pub use lock::{Acquired, LockHolder, LockState, RunLock, hostname};
pub use runs::{Entry, Flush, JournalRead, Lease, LeaseState, RunRow, RunStore, Seq};
