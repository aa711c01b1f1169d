//! [`store::RunStore`] on PostgreSQL: the runs of many processes on many machines in one database.
//!
//! ```text
//! store_schema(version)                                  migrations applied (embedded, in order)
//! runs(namespace, run, epoch, holder, lease_until)       one row a run: its lease
//! journal(namespace, run, seq, record)                   the journal, keyed by (run, seq)
//! documents(namespace, run, key, bytes)                  state, metadata, io/ records
//! ```
//!
//! **The queue** is a column of `runs`: `queued_at` is set while a run waits for a worker (or is
//! worked on: it stays set until the worker says the run needs no more work). [`PgStore::claim`]
//! takes the lease of the oldest queued run that nobody holds, or whose holder's lease ran out,
//! with `FOR UPDATE SKIP LOCKED`, so claiming workers never wait for one another.
//!
//! A *namespace* plays the part of the file store's root folder (a delta workspace, a dygram
//! executions folder): runs of different namespaces never meet.
//!
//! **Leases** are rows, not OS locks: taking one bumps the run's epoch and sets `lease_until` to now
//! plus the lease's time to live; a writer renews it ([`PgStore::renew`]) while it works, and gives it
//! up by dropping the [`Lease`]. A lease whose time ran out can be taken by another writer (its
//! previous holder is then reported as stale); so can, at once, a lease whose holder ran on the
//! same machine (same boot, same process namespace) and whose process is gone
//! ([`LockHolder::is_gone`]). **Fencing:** every append and document write runs in a
//! transaction that locks the run's row and compares its epoch with the lease's, so a writer whose
//! lease was taken over gets [`StoreError::Fenced`] and can never write after its successor; the row
//! lock also orders appenders, so sequence numbers have no gap and are never given twice.
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod conn;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use conn::{Conn, Params, Queries, Tx};
use postgres::{Client, NoTls};
use store::runs::{check_record, check_whole, validate_key};
use store::{
    Entry, Flush, JournalRead, Lease, LeaseState, LockHolder, RunRow, RunStore, Seq, StoreError,
    StoreResult, validate_id,
};

/// The migrations, in order; `store_schema` records how many were applied.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE runs (
        namespace   text        NOT NULL,
        run         text        NOT NULL,
        epoch       bigint      NOT NULL DEFAULT 0,
        holder      text,
        lease_until timestamptz,
        created_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (namespace, run)
    );
    CREATE TABLE journal (
        namespace text   NOT NULL,
        run       text   NOT NULL,
        seq       bigint NOT NULL,
        record    text   NOT NULL,
        PRIMARY KEY (namespace, run, seq),
        FOREIGN KEY (namespace, run) REFERENCES runs ON DELETE CASCADE
    );
    CREATE TABLE documents (
        namespace text  NOT NULL,
        run       text  NOT NULL,
        key       text  NOT NULL,
        bytes     bytea NOT NULL,
        PRIMARY KEY (namespace, run, key),
        FOREIGN KEY (namespace, run) REFERENCES runs ON DELETE CASCADE
    );
",
    "
    ALTER TABLE runs ADD COLUMN queued_at timestamptz;
    CREATE INDEX runs_queue ON runs (namespace, queued_at) WHERE queued_at IS NOT NULL;
",
];

/// An advisory-lock key that serialises migrations between processes.
const MIGRATION_LOCK: i64 = 0x6465_6c74_6173_746f;

/// How long a lease holds without renewal, unless the store is told otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Runs in a PostgreSQL database.
#[derive(Clone)]
pub struct PgStore {
    client: Arc<Mutex<Conn>>,
    /// Where to connect again when the connection was closed (a server restart, a network cut).
    url: Arc<str>,
    namespace: String,
    lease: Duration,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("namespace", &self.namespace)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

/// What a PostgreSQL lease holds: the way back to the row, to give the lease up when dropped.
struct PgGuard {
    client: Arc<Mutex<Conn>>,
    namespace: String,
    run: String,
    epoch: i64,
    /// The lease was committed: dropping it gives it up. A lease whose transaction did not commit
    /// has nothing to give up (and its taker still holds the connection).
    committed: bool,
}

impl Drop for PgGuard {
    fn drop(&mut self) {
        if !self.committed {
            return;
        }
        if let Ok(mut conn) = self.client.lock() {
            let _ = conn.execute(
                "UPDATE runs SET holder = NULL, lease_until = NULL
                 WHERE namespace = $1 AND run = $2 AND epoch = $3",
                &[&self.namespace, &self.run, &self.epoch],
            );
        }
    }
}

fn backend(action: &'static str) -> impl FnOnce(postgres::Error) -> StoreError {
    move |e| StoreError::Backend {
        action,
        source: Box::new(e),
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://…` or `host=… user=…`) and applies the migrations this
    /// version has and the database does not; the runs are those of `namespace`.
    pub fn connect(url: &str, namespace: &str) -> StoreResult<Self> {
        let mut client = Client::connect(url, NoTls).map_err(backend("connect to PostgreSQL"))?;
        migrate(&mut client)?;
        Ok(Self {
            client: Arc::new(Mutex::new(Conn::new(client))),
            url: url.into(),
            namespace: namespace.to_string(),
            lease: DEFAULT_LEASE,
        })
    }

    /// The same database, the runs of another namespace.
    pub fn with_namespace(&self, namespace: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            ..self.clone()
        }
    }

    /// Leases last `lease` without renewal.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The connection, made again first when the server closed it (a restart, a network cut):
    /// every write is fenced by its lease's epoch, so a new connection changes nothing of what a
    /// writer may do.
    fn client(&self) -> StoreResult<MutexGuard<'_, Conn>> {
        let mut conn = self.client.lock().map_err(|_| StoreError::Backend {
            action: "use the database connection",
            source: "a thread panicked while using it".into(),
        })?;
        if conn.client.is_closed() {
            *conn = Conn::new(
                Client::connect(&self.url, NoTls)
                    .map_err(backend("connect to PostgreSQL again"))?,
            );
        }
        Ok(conn)
    }

    fn lease_millis(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }

    /// Extends `lease` by the store's lease time; fails with [`StoreError::Fenced`] when another
    /// writer took the run over.
    fn renew_lease(&self, lease: &Lease) -> StoreResult<()> {
        self.fenced_update(
            lease,
            "renew a lease",
            "UPDATE runs SET lease_until = now() + $4::bigint * interval '1 millisecond'
             WHERE namespace = $1 AND run = $2 AND epoch = $3",
            &[&self.lease_millis()],
        )
    }

    /// One statement that changes the run's row only while `lease` is its current one: `sql`
    /// takes the namespace, the run and the lease's epoch as `$1`, `$2` and `$3`, then `more`.
    /// It is a transaction of its own (a single round trip); the row's lock orders it after a
    /// takeover, whose new epoch it then no longer matches.
    fn fenced_update(
        &self,
        lease: &Lease,
        action: &'static str,
        sql: &'static str,
        more: Params<'_>,
    ) -> StoreResult<()> {
        let epoch = lease_epoch(lease);
        let run = lease.run();
        let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> =
            vec![&self.namespace, &run, &epoch];
        params.extend_from_slice(more);
        let mut conn = self.client()?;
        if conn.execute(sql, &params).map_err(backend(action))? > 0 {
            return Ok(());
        }
        // Nothing changed: the run is gone, or the lease was taken over; or, with the lease still
        // current (an epoch only grows), the statement had nothing to change.
        match refusal(&mut conn, &self.namespace, lease)? {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    /// Takes the lease of `run`, creating the run first when `create` (in the same transaction,
    /// so nobody leases a run between its creation and its first lease).
    fn take(
        &self,
        client: &mut Conn,
        run: &str,
        holder: &LockHolder,
        create: bool,
    ) -> StoreResult<Lease> {
        validate_id(run)?;
        let mut tx = client
            .transaction()
            .map_err(backend("begin a transaction"))?;
        if create {
            insert_run(&mut tx, &self.namespace, run)?;
        }
        let lease = self.take_locked(&mut tx, run, holder)?;
        tx.commit().map_err(backend("commit"))?;
        committed(lease)
    }

    /// Takes the lease of `run` inside `tx`: fails while a live lease holds it; else bumps the
    /// epoch and names `holder`.
    fn take_locked(&self, tx: &mut Tx<'_>, run: &str, holder: &LockHolder) -> StoreResult<Lease> {
        let holder_json = serde_json::to_string(holder).map_err(|e| StoreError::Backend {
            action: "describe the lease holder",
            source: Box::new(e),
        })?;
        let row = tx
            .query_opt(
                "SELECT epoch, holder, lease_until > now() FROM runs
                 WHERE namespace = $1 AND run = $2 FOR UPDATE",
                &[&self.namespace, &run],
            )
            .map_err(backend("read a run's lease"))?;
        let Some(row) = row else {
            return Err(StoreError::NoRun {
                run: run.to_string(),
            });
        };
        let previous: Option<LockHolder> = row
            .get::<_, Option<String>>(1)
            .and_then(|h| serde_json::from_str(&h).ok());
        // A live lease is busy, unless its holder ran here and its process is gone (killed): the
        // run is taken over at once instead of when the lease runs out.
        let live = row.get::<_, Option<bool>>(2) == Some(true);
        if live && !previous.as_ref().is_some_and(LockHolder::is_gone) {
            return Err(StoreError::Busy {
                path: format!("{}/{run}", self.namespace).into(),
                holder: previous,
            });
        }
        let epoch = row.get::<_, i64>(0) + 1;
        tx.execute(
            "UPDATE runs SET epoch = $3, holder = $4,
                    lease_until = now() + $5::bigint * interval '1 millisecond'
             WHERE namespace = $1 AND run = $2",
            &[
                &self.namespace,
                &run,
                &epoch,
                &holder_json,
                &self.lease_millis(),
            ],
        )
        .map_err(backend("take a lease"))?;
        Ok(self.lease_of(run, epoch, previous))
    }

    /// The lease of `run` at `epoch` (taken from `previous`), not yet committed.
    fn lease_of(&self, run: &str, epoch: i64, previous: Option<LockHolder>) -> Lease {
        let guard = PgGuard {
            client: Arc::clone(&self.client),
            namespace: self.namespace.clone(),
            run: run.to_string(),
            epoch,
            committed: false,
        };
        Lease::new(
            run,
            u64::try_from(epoch).unwrap_or(0),
            None,
            previous,
            Box::new(guard),
        )
    }

    fn entries(&self, run: &str, sql: &'static str, bound: i64) -> StoreResult<JournalRead> {
        validate_id(run)?;
        let mut client = self.client()?;
        let count = client
            .query_opt(
                "SELECT (SELECT count(*) FROM journal j
                         WHERE j.namespace = r.namespace AND j.run = r.run)
                 FROM runs r WHERE r.namespace = $1 AND r.run = $2",
                &[&self.namespace, &run],
            )
            .map_err(backend("count a journal"))?
            .ok_or_else(|| StoreError::NoRun {
                run: run.to_string(),
            })?;
        let len = u64::try_from(count.get::<_, i64>(0)).unwrap_or(0);
        let rows = client
            .query(sql, &[&self.namespace, &run, &bound])
            .map_err(backend("read a journal"))?;
        let mut entries: Vec<Entry> = rows
            .iter()
            .map(|r| Entry {
                seq: Seq(u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)),
                json: r.get(1),
            })
            .collect();
        entries.sort_by_key(|e| e.seq);
        Ok(JournalRead {
            entries,
            len,
            torn: None,
        })
    }
}

/// Creates the row of `run`; [`StoreError::Exists`] when there is one.
fn insert_run(tx: &mut Tx<'_>, namespace: &str, run: &str) -> StoreResult<()> {
    let inserted = tx
        .execute(
            "INSERT INTO runs (namespace, run) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&namespace, &run],
        )
        .map_err(backend("create a run"))?;
    if inserted == 0 {
        return Err(StoreError::Exists {
            run: run.to_string(),
        });
    }
    Ok(())
}

/// `lease`, whose transaction has committed: from now on, dropping it gives it up.
fn committed(mut lease: Lease) -> StoreResult<Lease> {
    lease.guard_mut::<PgGuard>()?.committed = true;
    Ok(lease)
}

/// Applies the migrations the database lacks, one process at a time.
fn migrate(client: &mut Client) -> StoreResult<()> {
    let mut tx = client
        .transaction()
        .map_err(backend("begin a transaction"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(backend("lock the schema"))?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS store_schema (version integer NOT NULL)")
        .map_err(backend("create the schema table"))?;
    let applied: i64 = tx
        .query_one("SELECT count(*) FROM store_schema", &[])
        .map_err(backend("read the schema version"))?
        .get(0);
    for (n, sql) in MIGRATIONS.iter().enumerate().skip(applied as usize) {
        tx.batch_execute(sql)
            .map_err(backend("migrate the schema"))?;
        let version = i32::try_from(n + 1).unwrap_or(i32::MAX);
        tx.execute("INSERT INTO store_schema VALUES ($1)", &[&version])
            .map_err(backend("record the schema version"))?;
    }
    tx.commit().map_err(backend("commit the schema"))
}

/// Appends `records` after the last line of the journal of `lease`'s run, in one statement that
/// locks the run's row and checks the lease's epoch (the key on (run, seq) refuses a number given
/// twice). The `seq` of the last line written; `None` where nothing was written: no records, or
/// the run is gone or was taken over.
fn append_fenced(
    on: &mut impl Queries,
    namespace: &str,
    lease: &Lease,
    records: &[&str],
) -> StoreResult<Option<i64>> {
    let rows = on
        .query(
            "WITH fence AS (
                 SELECT epoch FROM runs
                 WHERE namespace = $1::text AND run = $2::text FOR UPDATE),
             last AS (
                 SELECT coalesce(max(seq), 0) AS seq FROM journal
                 WHERE namespace = $1::text AND run = $2::text)
             INSERT INTO journal (namespace, run, seq, record)
             SELECT $1::text, $2::text, last.seq + line.n, line.record
             FROM fence, last, unnest($4::text[]) WITH ORDINALITY AS line(record, n)
             WHERE fence.epoch = $3::bigint
             RETURNING seq",
            &[&namespace, &lease.run(), &lease_epoch(lease), &records],
        )
        .map_err(backend("append to a journal"))?;
    Ok(rows.iter().map(|r| r.get::<_, i64>(0)).max())
}

/// The epoch of `lease` as the database holds it.
fn lease_epoch(lease: &Lease) -> i64 {
    i64::try_from(lease.epoch()).unwrap_or(i64::MAX)
}

/// Why a fenced statement that changed nothing was refused: the run is gone, or its lease was
/// taken over (`None`: `lease` is still the run's current one).
fn refusal(conn: &mut Conn, namespace: &str, lease: &Lease) -> StoreResult<Option<StoreError>> {
    let row = conn
        .query_opt(
            "SELECT epoch FROM runs WHERE namespace = $1 AND run = $2",
            &[&namespace, &lease.run()],
        )
        .map_err(backend("read a run's epoch"))?;
    let Some(row) = row else {
        return Ok(Some(StoreError::NoRun {
            run: lease.run().to_string(),
        }));
    };
    let current = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
    Ok((current != lease.epoch()).then(|| StoreError::Fenced {
        run: lease.run().to_string(),
        held: lease.epoch(),
        current,
    }))
}

/// Why a fenced write that must change a row changed none: [`refusal`]'s reason, else an error
/// that says so (the lease is current, yet nothing was written).
fn not_written(
    conn: &mut Conn,
    namespace: &str,
    lease: &Lease,
    action: &'static str,
) -> StoreResult<StoreError> {
    Ok(
        refusal(conn, namespace, lease)?.unwrap_or_else(|| StoreError::Backend {
            action,
            source: "nothing was written, and the lease is current".into(),
        }),
    )
}

impl PgStore {
    /// Refuses a lease this store did not grant (another database, or another namespace).
    fn own(&self, lease: &mut Lease) -> StoreResult<()> {
        let guard = lease.guard_mut::<PgGuard>()?;
        if guard.namespace == self.namespace && Arc::ptr_eq(&guard.client, &self.client) {
            return Ok(());
        }
        Err(StoreError::ForeignLease {
            run: lease.run().to_string(),
        })
    }
}

impl RunStore for PgStore {
    fn list(&self) -> StoreResult<Vec<String>> {
        let mut client = self.client()?;
        let rows = client
            .query(
                "SELECT run FROM runs WHERE namespace = $1 ORDER BY run",
                &[&self.namespace],
            )
            .map_err(backend("list runs"))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn create(&self, run: &str, holder: &LockHolder) -> StoreResult<Lease> {
        self.take(&mut *self.client()?, run, holder, true)
    }

    fn lease(&self, run: &str, holder: &LockHolder) -> StoreResult<Lease> {
        self.take(&mut *self.client()?, run, holder, false)
    }

    fn lease_state(&self, run: &str) -> StoreResult<LeaseState> {
        validate_id(run)?;
        let mut client = self.client()?;
        let row = client
            .query_opt(
                "SELECT holder, lease_until > now() FROM runs WHERE namespace = $1 AND run = $2",
                &[&self.namespace, &run],
            )
            .map_err(backend("read a run's lease"))?
            .ok_or_else(|| StoreError::NoRun {
                run: run.to_string(),
            })?;
        let holder: Option<LockHolder> = row
            .get::<_, Option<String>>(0)
            .and_then(|h| serde_json::from_str(&h).ok());
        Ok(match (holder, row.get::<_, Option<bool>>(1)) {
            (holder, Some(true)) => LeaseState::Held(holder),
            (Some(holder), _) => LeaseState::Stale(holder),
            (None, _) => LeaseState::Free,
        })
    }

    fn append(&self, lease: &mut Lease, records: &[&str]) -> StoreResult<Seq> {
        for record in records {
            check_record(lease.run(), record)?;
        }
        self.own(lease)?;
        let mut conn = self.client()?;
        if records.is_empty() {
            // Nothing to write: the journal's end, once the lease is known to be current.
            if let Some(refused) = refusal(&mut conn, &self.namespace, lease)? {
                return Err(refused);
            }
            let last: i64 = conn
                .query_one(
                    "SELECT coalesce(max(seq), 0) FROM journal WHERE namespace = $1 AND run = $2",
                    &[&self.namespace, &lease.run()],
                )
                .map_err(backend("read a journal's end"))?
                .get(0);
            return Ok(Seq(u64::try_from(last).unwrap_or(0)));
        }
        match append_fenced(&mut *conn, &self.namespace, lease, records)? {
            Some(last) => Ok(Seq(u64::try_from(last).unwrap_or(0))),
            None => Err(not_written(
                &mut conn,
                &self.namespace,
                lease,
                "append to a journal",
            )?),
        }
    }

    fn read_journal(&self, run: &str, after: Seq) -> StoreResult<JournalRead> {
        let after = i64::try_from(after.0).unwrap_or(i64::MAX);
        self.entries(
            run,
            "SELECT seq, record FROM journal WHERE namespace = $1 AND run = $2 AND seq > $3
             ORDER BY seq",
            after,
        )
    }

    fn read_tail(&self, run: &str, count: usize) -> StoreResult<JournalRead> {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.entries(
            run,
            "SELECT seq, record FROM journal WHERE namespace = $1 AND run = $2
             ORDER BY seq DESC LIMIT $3",
            count,
        )
    }

    fn put(&self, lease: &mut Lease, key: &str, bytes: &[u8], _flush: Flush) -> StoreResult<()> {
        validate_key(key)?;
        self.own(lease)?;
        let epoch = lease_epoch(lease);
        let mut conn = self.client()?;
        let written = conn
            .execute(
                "WITH fence AS (
                     SELECT epoch FROM runs
                     WHERE namespace = $1::text AND run = $2::text FOR UPDATE)
                 INSERT INTO documents (namespace, run, key, bytes)
                 SELECT $1::text, $2::text, $4::text, $5::bytea FROM fence
                 WHERE fence.epoch = $3::bigint
                 ON CONFLICT (namespace, run, key) DO UPDATE SET bytes = EXCLUDED.bytes",
                &[&self.namespace, &lease.run(), &epoch, &key, &bytes],
            )
            .map_err(backend("write a document"))?;
        if written > 0 {
            return Ok(());
        }
        Err(not_written(
            &mut conn,
            &self.namespace,
            lease,
            "write a document",
        )?)
    }

    fn get(&self, run: &str, key: &str) -> StoreResult<Option<Vec<u8>>> {
        validate_id(run)?;
        validate_key(key)?;
        let mut client = self.client()?;
        let row = client
            .query_opt(
                "SELECT bytes FROM documents WHERE namespace = $1 AND run = $2 AND key = $3",
                &[&self.namespace, &run, &key],
            )
            .map_err(backend("read a document"))?;
        Ok(row.map(|r| r.get(0)))
    }

    fn keys(&self, run: &str, prefix: &str) -> StoreResult<Vec<String>> {
        validate_id(run)?;
        let mut client = self.client()?;
        let rows = client
            .query(
                "SELECT key FROM documents WHERE namespace = $1 AND run = $2
                 AND starts_with(key, $3) ORDER BY key",
                &[&self.namespace, &run, &prefix],
            )
            .map_err(backend("list documents"))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn remove(&self, mut lease: Lease) -> StoreResult<()> {
        self.own(&mut lease)?;
        self.fenced_update(
            &lease,
            "remove a run",
            "DELETE FROM runs WHERE namespace = $1 AND run = $2 AND epoch = $3",
            &[],
        )?;
        drop(lease);
        Ok(())
    }

    fn lease_time(&self) -> Option<Duration> {
        Some(self.lease)
    }

    fn renew(&self, lease: &mut Lease) -> StoreResult<()> {
        self.renew_lease(lease)
    }

    /// Puts the run in the queue for workers (`true`), or takes it out once it needs no more work.
    fn set_queued(&self, lease: &mut Lease, queued: bool) -> StoreResult<()> {
        self.own(lease)?;
        self.fenced_update(
            lease,
            "queue a run",
            "UPDATE runs SET queued_at = CASE WHEN $4 THEN coalesce(queued_at, now()) END
             WHERE namespace = $1 AND run = $2 AND epoch = $3",
            &[&queued],
        )
    }

    /// Moves a queued run to the back of the queue (its turn comes again after the runs queued
    /// before now), for a run that cannot be worked on yet: it does not hold up the others.
    fn defer(&self, lease: &mut Lease) -> StoreResult<()> {
        self.own(lease)?;
        self.fenced_update(
            lease,
            "defer a run",
            "UPDATE runs SET queued_at = now()
             WHERE namespace = $1 AND run = $2 AND epoch = $3 AND queued_at IS NOT NULL",
            &[],
        )
    }

    /// Creates `run` with its whole journal (`records`, numbered from 1) and its `documents`, in
    /// one transaction: a process killed on the way leaves nothing. Returns its lease.
    fn create_whole(
        &self,
        run: &str,
        holder: &LockHolder,
        records: &[&str],
        documents: &[(&str, &[u8])],
    ) -> StoreResult<Lease> {
        check_whole(run, records, documents)?;
        let mut client = self.client()?;
        let mut tx = client
            .transaction()
            .map_err(backend("begin a transaction"))?;
        insert_run(&mut tx, &self.namespace, run)?;
        let lease = self.take_locked(&mut tx, run, holder)?;
        append_fenced(&mut tx, &self.namespace, &lease, records)?;
        for (key, bytes) in documents {
            tx.execute(
                "INSERT INTO documents (namespace, run, key, bytes) VALUES ($1, $2, $3, $4)",
                &[&self.namespace, &run, key, bytes],
            )
            .map_err(backend("write a document"))?;
        }
        tx.commit().map_err(backend("commit"))?;
        committed(lease)
    }

    /// Takes the lease of the oldest queued run that no live lease holds (a run whose worker died
    /// or was cut off is taken over), or `None` when there is none. Workers claiming at the same
    /// time skip one another's rows instead of waiting.
    fn claim(&self, holder: &LockHolder) -> StoreResult<Option<Lease>> {
        let holder_json = serde_json::to_string(holder).map_err(|e| StoreError::Backend {
            action: "describe the lease holder",
            source: Box::new(e),
        })?;
        // One statement: the run picked, locked and leased (its epoch bumped, its previous holder
        // returned to be reported as stale).
        let row = self
            .client()?
            .query_opt(
                "WITH pick AS (
                     SELECT run, epoch, holder FROM runs
                     WHERE namespace = $1 AND queued_at IS NOT NULL
                       AND (holder IS NULL OR lease_until IS NULL OR lease_until <= now())
                     ORDER BY queued_at, run LIMIT 1 FOR UPDATE SKIP LOCKED)
                 UPDATE runs SET epoch = pick.epoch + 1, holder = $2,
                        lease_until = now() + $3::bigint * interval '1 millisecond'
                 FROM pick WHERE runs.namespace = $1 AND runs.run = pick.run
                 RETURNING runs.run, runs.epoch, pick.holder",
                &[&self.namespace, &holder_json, &self.lease_millis()],
            )
            .map_err(backend("claim a queued run"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let previous: Option<LockHolder> = row
            .get::<_, Option<String>>(2)
            .and_then(|h| serde_json::from_str(&h).ok());
        let lease = self.lease_of(&row.get::<_, String>(0), row.get(1), previous);
        committed(lease).map(Some)
    }

    /// How many runs are queued (waiting for a worker or being worked on).
    fn queued(&self) -> StoreResult<u64> {
        let mut client = self.client()?;
        let row = client
            .query_one(
                "SELECT count(*) FROM runs WHERE namespace = $1 AND queued_at IS NOT NULL",
                &[&self.namespace],
            )
            .map_err(backend("count queued runs"))?;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }

    /// Every run of the namespace with its lease and queue state, in name order.
    fn rows(&self) -> StoreResult<Vec<RunRow>> {
        let mut client = self.client()?;
        let rows = client
            .query(
                "SELECT run, epoch, holder, coalesce(lease_until > now(), false),
                        queued_at IS NOT NULL,
                        (extract(epoch FROM created_at) * 1000)::bigint
                 FROM runs WHERE namespace = $1 ORDER BY run",
                &[&self.namespace],
            )
            .map_err(backend("list runs"))?;
        Ok(rows
            .iter()
            .map(|r| RunRow {
                run: r.get(0),
                epoch: u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
                holder: r
                    .get::<_, Option<String>>(2)
                    .and_then(|h| serde_json::from_str(&h).ok()),
                live: r.get(3),
                queued: r.get(4),
                created: jiff::Timestamp::from_millisecond(r.get(5)).unwrap_or_default(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests;
