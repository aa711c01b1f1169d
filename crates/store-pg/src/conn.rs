//! The connection to the server, with the statements prepared on it.
//!
//! Every statement of this crate is a constant text: it is parsed and planned by the server once
//! per connection ([`Prepared`]), after which each use is a single round trip that only binds and
//! executes it. A new connection (after the server closed the old one) starts with none prepared.

use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, GenericClient, Row, Statement, Transaction};

/// The parameters of a statement.
pub(crate) type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

/// The statements prepared on one connection, by their text.
#[derive(Default)]
pub(crate) struct Prepared(HashMap<&'static str, Statement>);

impl Prepared {
    /// `sql` prepared on `on`'s connection: the first time through the server, after that from here.
    fn get(
        &mut self,
        on: &mut impl GenericClient,
        sql: &'static str,
    ) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.0.get(sql) {
            return Ok(statement.clone());
        }
        let statement = on.prepare(sql)?;
        self.0.insert(sql, statement.clone());
        Ok(statement)
    }
}

/// Running the crate's statements, prepared once: on a connection ([`Conn`]) or in a transaction
/// on it ([`Tx`]).
pub(crate) trait Queries {
    /// Where statements run.
    type On: GenericClient;

    /// Where statements run, and the statements prepared on its connection.
    fn parts(&mut self) -> (&mut Self::On, &mut Prepared);

    fn query_opt(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> Result<Option<Row>, postgres::Error> {
        let (on, prepared) = self.parts();
        let statement = prepared.get(on, sql)?;
        on.query_opt(&statement, params)
    }

    fn query_one(&mut self, sql: &'static str, params: Params<'_>) -> Result<Row, postgres::Error> {
        let (on, prepared) = self.parts();
        let statement = prepared.get(on, sql)?;
        on.query_one(&statement, params)
    }

    fn query(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, postgres::Error> {
        let (on, prepared) = self.parts();
        let statement = prepared.get(on, sql)?;
        on.query(&statement, params)
    }

    /// Runs `sql`; the number of rows it changed (on a connection, it is a transaction of its own).
    fn execute(&mut self, sql: &'static str, params: Params<'_>) -> Result<u64, postgres::Error> {
        let (on, prepared) = self.parts();
        let statement = prepared.get(on, sql)?;
        on.execute(&statement, params)
    }
}

/// A connection and what was prepared on it.
pub(crate) struct Conn {
    pub(crate) client: Client,
    prepared: Prepared,
}

impl Conn {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            client,
            prepared: Prepared::default(),
        }
    }

    pub(crate) fn transaction(&mut self) -> Result<Tx<'_>, postgres::Error> {
        Ok(Tx {
            tx: self.client.transaction()?,
            prepared: &mut self.prepared,
        })
    }
}

impl Queries for Conn {
    type On = Client;

    fn parts(&mut self) -> (&mut Client, &mut Prepared) {
        (&mut self.client, &mut self.prepared)
    }
}

/// A transaction on a [`Conn`], using (and adding to) its prepared statements.
pub(crate) struct Tx<'c> {
    tx: Transaction<'c>,
    prepared: &'c mut Prepared,
}

impl Tx<'_> {
    pub(crate) fn commit(self) -> Result<(), postgres::Error> {
        self.tx.commit()
    }
}

impl<'c> Queries for Tx<'c> {
    type On = Transaction<'c>;

    fn parts(&mut self) -> (&mut Transaction<'c>, &mut Prepared) {
        (&mut self.tx, self.prepared)
    }
}
