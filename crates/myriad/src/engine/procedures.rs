//! The procedure registry of a `Database` (compiling is `procedure/`'s): registering,
//! looking up and calling stored procedures, each call as its own transaction.

use super::Database;
use crate::error::{Error, Result};
use crate::procedure::{self, Arg, Def, Procedure, ProcedureBuilder};
use crate::txn::TxnOptions;
use crate::value::Value;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Procedure {
    /// Runs the procedure as its own transaction at the database's default isolation level,
    /// retrying serialization failures like [`Database::run`].
    pub fn call(&self, db: &Database, args: &[Arg]) -> Result<Vec<Value>> {
        self.call_with(
            db,
            TxnOptions {
                isolation: db.config().isolation,
                read_only: false,
            },
            args,
        )
    }

    /// [`Procedure::call`] with explicit transaction options.
    pub fn call_with(&self, db: &Database, opts: TxnOptions, args: &[Arg]) -> Result<Vec<Value>> {
        let mut f = self.bound_frame(args)?;
        db.attempts(opts, |tx| self.call_in(tx, &mut f))
    }
}

impl Database {
    /// Compiles and registers every `CREATE [OR REPLACE] PROCEDURE` in `sql` (other statements
    /// are an error); returns the procedures in order. Nothing is registered if any fails.
    pub fn create_procedures(&self, sql: &str) -> Result<Vec<Arc<Procedure>>> {
        let out: Vec<(Arc<Procedure>, bool)> = procedure::compile_script(&self.shared, sql)?
            .into_iter()
            .map(|(p, replace)| (Arc::new(p), replace))
            .collect();
        self.register_all(&out)?;
        Ok(out.into_iter().map(|(p, _)| p).collect())
    }

    /// Compiles and registers one parsed definition (`CREATE PROCEDURE` in a SQL session).
    pub(crate) fn create_procedure_from(&self, d: &Def, replace: bool) -> Result<()> {
        let p = Arc::new(procedure::compile_def(&self.shared, d)?);
        self.register_all(&[(p, replace)])
    }

    /// Compiles a procedure kept in the catalog as definition number `def` (recovery).
    pub(crate) fn procedure_from_catalog(&self, sql: &str, def: u32) -> Result<Procedure> {
        procedure::compile_from_catalog(&self.shared, sql, def)
    }

    /// Compiles a procedure without registering it (`myriad explain`).
    pub fn compile_procedures(&self, sql: &str) -> Result<Vec<Procedure>> {
        procedure::compile_all(&self.shared, sql)
    }

    /// Compiles and registers a procedure made with the builder.
    pub fn register_procedure(&self, b: ProcedureBuilder) -> Result<Arc<Procedure>> {
        let p = Arc::new(procedure::compile_built(&self.shared, &b)?);
        self.register_all(&[(p.clone(), false)])?;
        Ok(p)
    }

    /// Registers all or none: an existing name without `replace` fails the whole set. A
    /// durable database writes the SQL-defined ones to its catalog first.
    pub(crate) fn register_all(&self, ps: &[(Arc<Procedure>, bool)]) -> Result<()> {
        let mut reg = self.procedures.write().unwrap_or_else(|e| e.into_inner());
        for (p, replace) in ps {
            if !replace && reg.contains_key(&p.name().to_ascii_lowercase()) {
                return Err(Error::AlreadyExists(p.name().to_string()));
            }
        }
        if let Some(d) = &self.shared.durable {
            let kept: Vec<&Arc<Procedure>> = ps
                .iter()
                .map(|(p, _)| p)
                .filter(|p| !p.source().is_empty())
                .collect();
            if !kept.is_empty() {
                let sqls = kept.iter().map(|p| p.source().to_string()).collect();
                if d.log_catalog(&crate::log::catalog::Record::Procedures(sqls))? {
                    // Numbered in catalog order; we hold the registry's write lock.
                    let first = d.procedure_definitions.load(Ordering::Relaxed);
                    for (i, p) in kept.iter().enumerate() {
                        p.set_logged_as(first + i as u32);
                    }
                    d.procedure_definitions
                        .store(first + kept.len() as u32, Ordering::Relaxed);
                }
            }
        }
        for (p, _) in ps {
            reg.insert(p.name().to_ascii_lowercase(), p.clone());
        }
        if crate::cc::heals(self.shared.config.protocol) {
            // `healing` locks rows in the validation order of every registered procedure
            // (thesis §3.4.5, `cc/healing.rs`). Ranked while the registry's lock is held,
            // so registrations rank in turn.
            let all: Vec<&Procedure> = reg.values().map(|p| &**p).collect();
            let order = procedure::healing::validation_order(&all);
            for (rank, name) in order.tables.iter().enumerate() {
                if let Ok(t) = self.shared.table(name) {
                    let rank = u16::try_from(rank).unwrap_or(crate::cc::healing::UNRANKED - 1);
                    t.heal_rank.store(rank, Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }

    /// The registered procedure of this name (case-insensitive). Keep the handle: calling
    /// through it skips the name lookup.
    pub fn procedure(&self, name: &str) -> Result<Arc<Procedure>> {
        self.procedures
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&name.to_ascii_lowercase())
            .cloned()
            .ok_or_else(|| Error::UnknownProcedure(name.to_string()))
    }

    /// Names of the registered procedures, sorted.
    pub fn procedure_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .procedures
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|p| p.name().to_string())
            .collect();
        v.sort();
        v
    }

    /// Calls the registered procedure `name` as its own transaction (see [`Procedure::call`]).
    pub fn call(&self, name: &str, args: &[Arg]) -> Result<Vec<Value>> {
        self.procedure(name)?.call(self, args)
    }
}

impl procedure::slice::Registered for Database {
    fn registered_procedures(&self) -> Vec<Arc<Procedure>> {
        self.procedure_names()
            .into_iter()
            .filter_map(|n| self.procedure(&n).ok())
            .collect()
    }
}
