//! Batched deliveries, for a destination whose settings batch (the core's
//! `webhooks::Batching`, `[sources.webhooks.batch]`).
//!
//! * The fresh calls a claim takes for such a source are packed by the
//!   core (`Webhooks::pack`: filters, integrations, the limits) and each
//!   batch is delivered as one call is: one POST, one answer for all.
//! * A batch that waits for its next round keeps its id on every one of its
//!   rows, with one due time, and its state (which holds the whole batch's
//!   body) on one of them only, its lead (its first row); rows claimed
//!   again together with their lead are delivered together again from that
//!   state, so a retried batch is the same bytes under the same id. A
//!   batch's attempt log is likewise its lead's alone.
//! * A claim holds all of a batch's rows or only some (another relay took
//!   the others, or the claim's room ended inside the batch). With some,
//!   they are packed again into a batch of their own, with a new id and a
//!   new retry window: sending the whole batch would send the others'
//!   calls twice. So is a saved batch that no longer fits the destination
//!   (its endpoints changed).

use super::{drive, finish_row, jitter_seed, not_now, traced_by, turn, InBatch, NotNow, Shared};
use crate::store::{Claimed, Finish};
use callpost_core::webhooks::Webhooks;
use callpost_core::{Call, Delivery, DeliveryConfig};
use std::sync::Arc;

/// What one delivery task does with claimed rows.
pub(super) enum Work {
    /// One call, as without batching.
    One(Claimed),
    /// Fresh calls of a destination that batches, to pack.
    Fresh(Vec<Claimed>),
    /// The rows of one batch under way, which share its saved state.
    Saved(Vec<Claimed>),
}

impl Work {
    /// The rows it holds.
    pub(super) fn ids(&self) -> Vec<i64> {
        match self {
            Self::One(row) => vec![row.id],
            Self::Fresh(rows) | Self::Saved(rows) => rows.iter().map(|r| r.id).collect(),
        }
    }
}

/// How the rows claimed for `source` are delivered: the fresh calls of
/// each destination that batches packed together, a batch under way
/// together, every other row alone.
pub(super) fn plan(shared: &Shared, source: &str, claimed: Vec<Claimed>) -> Vec<Work> {
    let mut out = Vec::new();
    let mut fresh: Vec<(String, Vec<Claimed>)> = Vec::new();
    let mut saved: Vec<(String, Vec<Claimed>)> = Vec::new();
    let mut batches: Vec<(String, bool)> = Vec::new();
    for row in claimed {
        let batching = match batches.iter().find(|(d, _)| *d == row.destination) {
            Some((_, b)) => *b,
            None => {
                let b = destination(shared, source, &row.destination)
                    .is_some_and(|w| w.batching().is_some());
                batches.push((row.destination.clone(), b));
                b
            }
        };
        match row.batch.clone() {
            Some(id) => match saved.iter_mut().find(|(b, _)| *b == id) {
                Some((_, rows)) => rows.push(row),
                None => saved.push((id, vec![row])),
            },
            None if batching && row.state.is_none() => {
                match fresh.iter_mut().find(|(d, _)| *d == row.destination) {
                    Some((_, rows)) => rows.push(row),
                    None => fresh.push((row.destination.clone(), vec![row])),
                }
            }
            None => out.push(Work::One(row)),
        }
    }
    out.extend(fresh.into_iter().map(|(_, rows)| Work::Fresh(rows)));
    out.extend(saved.into_iter().map(|(_, rows)| Work::Saved(rows)));
    out
}

/// Delivers `work`: the result of each of its rows.
pub(super) async fn run(shared: &Arc<Shared>, work: Work) -> Vec<Finish> {
    let (rows, under_way) = match work {
        Work::One(row) => return vec![turn(shared, row).await],
        Work::Fresh(rows) => (rows, false),
        Work::Saved(rows) => (rows, true),
    };
    let Some(webhooks) = rows
        .first()
        .and_then(|r| destination(shared, &r.source, &r.destination))
    else {
        return rows
            .iter()
            .map(|r| not_now(shared, r, NotNow::NoDestination))
            .collect();
    };
    if under_way {
        saved(shared, &webhooks, rows).await
    } else {
        fresh(shared, &webhooks, rows).await
    }
}

/// The settings of `source`'s destination `name`, while it is enabled.
fn destination(shared: &Shared, source: &str, name: &str) -> Option<Webhooks> {
    shared
        .relay
        .sources()
        .get(source)
        .and_then(|s| s.routed(name))
        .cloned()
}

async fn fresh(shared: &Arc<Shared>, webhooks: &Webhooks, rows: Vec<Claimed>) -> Vec<Finish> {
    let mut out = Vec::with_capacity(rows.len());
    let mut calls = Vec::with_capacity(rows.len());
    let mut kept = Vec::with_capacity(rows.len());
    for row in rows {
        match Call::from_json_str(&row.message) {
            Ok(call) => {
                calls.push(call);
                kept.push(row);
            }
            Err(e) => out.push(not_now(
                shared,
                &row,
                NotNow::Broken(e.code(), e.to_string()),
            )),
        }
    }
    let now = shared.relay.clock.now();
    let Ok(packed) = webhooks.pack(&calls, now) else {
        // A call with no body: each goes alone, and the core says which.
        for row in kept {
            out.push(turn(shared, row).await);
        }
        return out;
    };
    // A call the filters or its integrations keep out ends at once, alone.
    for (i, _) in &packed.skipped {
        out.push(turn(shared, kept[*i].clone()).await);
    }
    for batch in &packed.batches {
        let members: Vec<&Claimed> = batch.members.iter().map(|&i| &kept[i]).collect();
        let Some(first) = members.first() else {
            continue;
        };
        let config = DeliveryConfig::new(jitter_seed(first));
        match Delivery::for_batch(webhooks, batch, now, config) {
            Ok(d) => out.extend(deliver(shared, d, &members).await),
            Err(e) => out.extend(
                members
                    .iter()
                    .map(|r| not_now(shared, r, NotNow::Broken(e.code(), e.to_string()))),
            ),
        }
    }
    out
}

async fn saved(shared: &Arc<Shared>, webhooks: &Webhooks, rows: Vec<Claimed>) -> Vec<Finish> {
    // The lead keeps the batch's state; without it (claimed apart) the
    // rows here are packed again.
    let state = rows.iter().find_map(|r| r.state.as_deref()).unwrap_or("");
    let restored = Delivery::from_json(state, webhooks).map_err(|e| e.to_string());
    match restored {
        Ok(d) if d.batch_size() == Some(rows.len()) => {
            let members: Vec<&Claimed> = rows.iter().collect();
            deliver(shared, d, &members).await
        }
        outcome => {
            // Its endpoints changed, or this claim holds only some of its
            // calls (the others went to another claim): sending the whole
            // batch would send those twice, so these calls make a batch of
            // their own.
            let why = outcome
                .err()
                .unwrap_or_else(|| "some of its calls are claimed apart".into());
            tracing::info!(
                source = %rows[0].source,
                "a batch's {} calls here are packed again: {why}",
                rows.len()
            );
            let rows = rows
                .into_iter()
                .map(|mut r| {
                    r.state = None;
                    r.batch = None;
                    r
                })
                .collect();
            fresh(shared, webhooks, rows).await
        }
    }
}

/// Drives a batch's delivery and stores each of its rows where it was
/// left: one outcome, or one due time, for all; the saved state and the
/// attempt log on the lead (the first row, by id) alone.
async fn deliver(shared: &Arc<Shared>, mut d: Delivery, rows: &[&Claimed]) -> Vec<Finish> {
    let Some(first) = rows.first() else {
        return Vec::new();
    };
    let id = d.message_id().unwrap_or_default().to_owned();
    // One POST, one span: in the trace of the first call's request.
    let traced = traced_by(first);
    let (driven, made) = drive(shared, &mut d, &first.source, &id, traced).await;
    let lead = rows.iter().map(|r| r.id).min();
    rows.iter()
        .map(|r| {
            let batch = InBatch {
                id: &id,
                lead: Some(r.id) == lead,
            };
            finish_row(
                shared,
                r,
                &d,
                driven.clone(),
                r.attempts + made,
                Some(batch),
            )
        })
        .collect()
}
