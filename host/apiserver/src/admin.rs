//! The fault-injection admin endpoints: `POST /_admin/{drop-watches,expire-next-watch,fail,
//! latency,reset}`, `/_admin/requests` (the request log) and `POST
//! /_admin/advance-cronjob-clock` (`{"seconds": n}`: the CronJob controller's test clock).

use std::time::Duration;

use axum::body::Body;
use http::Response;
use serde_json::{Value, json};

use super::Inner;
use super::faults::Rule;
use super::handlers::json_response;
use super::status::{ApiError, ApiResult};

/// One admin action.
pub(crate) fn admin(inner: &Inner, action: &str, body: &[u8]) -> ApiResult<Response<Body>> {
    let f = &inner.faults;
    let parse = |b: &[u8]| -> ApiResult<Value> {
        if b.is_empty() {
            return Ok(json!({}));
        }
        serde_json::from_slice(b).map_err(|e| ApiError::bad_request(format!("bad admin body: {e}")))
    };
    match action {
        "drop-watches" => f.drop_watches(),
        "expire-next-watch" => f.expire_next_watch(),
        "fail" => {
            let rule: Rule = serde_json::from_value(parse(body)?)
                .map_err(|e| ApiError::bad_request(format!("bad rule: {e}")))?;
            f.add_rule(rule);
        }
        "latency" => {
            let ms = parse(body)?.get("ms").and_then(Value::as_u64).unwrap_or(0);
            f.latency(Duration::from_millis(ms));
        }
        "reset" => f.reset(),
        "advance-cronjob-clock" => {
            let seconds = parse(body)?
                .get("seconds")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            // A jump past chrono's range (some 292 million years) is refused, not a panic.
            let by = (i64::try_from(seconds).ok())
                .and_then(chrono::TimeDelta::try_seconds)
                .ok_or_else(|| ApiError::bad_request(format!("cannot advance by {seconds} s")))?;
            let mut st = inner.store.lock();
            st.cluster.cronjob_clock = (st.cluster.cronjob_clock.checked_add(&by))
                .ok_or_else(|| ApiError::bad_request(format!("cannot advance by {seconds} s")))?;
            st.wake_within(Duration::ZERO);
        }
        "requests" => return Ok(json_response(200, &json!(inner.audit.requests()))),
        _ => return Err(ApiError::not_found_path()),
    }
    Ok(json_response(
        200,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
    ))
}
