//! `wasmctrl:plugin/sql`: statements against the databases the operator granted, allowed only for
//! databases the manifest declares as `sql:<name>` and bounded by what is left of the deadline.

use crate::plugin::bindings::current::wasmctrl::plugin::sql::{Host, Rows, SqlError, Statement};

use super::State;

fn refused(message: String) -> SqlError {
    SqlError {
        message,
        sqlstate: None,
        transient: false,
    }
}

impl Host for State {
    fn execute(
        &mut self,
        database: String,
        statements: Vec<Statement>,
    ) -> Result<Vec<Rows>, SqlError> {
        let capability = format!("sql:{database}");
        match &self.scope {
            None => return Err(refused("sql cannot be used from manifest()".into())),
            Some(scope) if !scope.has_capability(&capability) => {
                return Err(refused(format!(
                    "plugin {} did not declare the capability {capability} in its manifest",
                    self.plugin
                )));
            }
            Some(_) => {}
        }
        let left = self.deadline.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            return Err(SqlError {
                message: "the reconcile's deadline has passed".into(),
                sqlstate: None,
                transient: true,
            });
        }
        let result = self.databases.execute(&database, &statements, left);
        if let Err(e) = &result {
            tracing::debug!(plugin.name = %self.plugin, object.key = %self.key, database, error = %e.message, "sql call failed");
        }
        result
    }
}
