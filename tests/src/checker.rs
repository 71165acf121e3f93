//! The checker: what the journal says must (and may) be found after a crash, held against a
//! store recovered from a crash image.

use crate::*;

/// What the journal says must (and may) be found after a crash.
#[derive(Debug, Default)]
pub(crate) struct Expect {
    /// The recovered last sequence must be at least this.
    pub(crate) durable_last: u64,
    /// seq -> id: acknowledged durable and not (possibly) removed.
    pub(crate) must: BTreeMap<u64, u64>,
    /// seq -> ids that may legitimately be found there.
    pub(crate) may: BTreeMap<u64, Vec<u64>>,
    /// Appends and deletes not yet durable.
    pub(crate) pending_appends: Vec<(u64, u64)>,
    pub(crate) pending_deletes: Vec<u64>,
    /// Acknowledged messages a `purge_ex` in flight may or may not remove.
    pub(crate) held: BTreeMap<u64, u64>,
    /// A floor operation in flight: its `upto`, and the acknowledged messages it may remove
    /// (all of them must survive, or none).
    pub(crate) floor_in_flight: Option<(u64, BTreeMap<u64, u64>)>,
    /// seq -> deadline of the messages appended with a ttl (the next `Appending`'s, while
    /// `next_ttl` holds it).
    pub(crate) deadlines: BTreeMap<u64, i64>,
    next_ttl: Option<i64>,
    /// Per consumer, the states a crash image may hold (`consumers.rs`).
    pub(crate) consumers: Candidates,
}

/// The clock of a store recovered from a crash image ([`open_image`]).
pub(crate) const RECOVERY_NS: i64 = 4_000_000_000;

impl Expect {
    pub(crate) fn from_events(events: &[Event]) -> Expect {
        let mut x = Expect::default();
        for ev in events {
            note_consumer_event(&mut x.consumers, ev);
            match ev {
                Event::Appending { seq, id } => {
                    x.may.entry(*seq).or_default().push(*id);
                    // a sequence issued again (after a truncate) does not inherit a ttl
                    match x.next_ttl.take() {
                        Some(d) => x.deadlines.insert(*seq, d),
                        None => x.deadlines.remove(seq),
                    };
                }
                Event::Ttl { deadline } => x.next_ttl = Some(*deadline),
                Event::Skipped { last } => x.durable_last = x.durable_last.max(*last),
                Event::Appended { seq, id, durable } => {
                    if *durable {
                        x.must.insert(*seq, *id);
                        x.durable_last = x.durable_last.max(*seq);
                    } else {
                        x.pending_appends.push((*seq, *id));
                    }
                }
                Event::Synced => {
                    for (seq, id) in std::mem::take(&mut x.pending_appends) {
                        if x.may.get(&seq).is_some_and(|v| v.contains(&id)) {
                            x.must.insert(seq, id);
                            x.durable_last = x.durable_last.max(seq);
                        }
                    }
                    for seq in std::mem::take(&mut x.pending_deletes) {
                        x.may.remove(&seq);
                    }
                }
                Event::Deleting { seq } => {
                    // from here the tombstone may be durable
                    x.must.remove(seq);
                    x.pending_appends.retain(|(s, _)| s != seq);
                }
                Event::Deleted { seq, durable } => {
                    x.must.remove(seq);
                    x.pending_appends.retain(|(s, _)| s != seq);
                    if *durable {
                        x.may.remove(seq);
                    } else {
                        x.pending_deletes.push(*seq);
                    }
                }
                Event::FloorStart { upto } => {
                    // it may commit before the crash: nothing at or below it is owed on its
                    // own any more, but the old messages come back all together or not at all
                    let old = x.must.iter().filter(|(s, _)| *s <= upto);
                    let old = old.map(|(s, i)| (*s, *i)).collect();
                    x.floor_in_flight = Some((*upto, old));
                    x.must.retain(|s, _| s > upto);
                }
                Event::FloorDone { upto } => {
                    x.floor_in_flight = None;
                    x.may.retain(|s, _| s > upto);
                    x.must.retain(|s, _| s > upto);
                    x.pending_appends.retain(|(s, _)| s > upto);
                    x.durable_last = x.durable_last.max(*upto);
                }
                Event::Removing => {
                    // any live message may be among those removed until it returns
                    x.held = std::mem::take(&mut x.must);
                }
                Event::Removed { seqs } => {
                    x.must = std::mem::take(&mut x.held);
                    for s in seqs {
                        x.may.remove(s);
                        x.must.remove(s);
                    }
                }
                Event::TruncateStart { seq } => {
                    x.must.retain(|s, _| s <= seq);
                    x.durable_last = x.durable_last.min(*seq);
                }
                Event::TruncateDone { seq } => {
                    x.may.retain(|s, _| s <= seq);
                    x.pending_appends.retain(|(s, _)| s <= seq);
                    // a pending delete above the cut was of a message that is gone now; the
                    // sequence will be issued again and must not inherit it
                    x.pending_deletes.retain(|s| s <= seq);
                    x.durable_last = *seq;
                }
                Event::Consumer { .. } => {}
            }
        }
        x.expire(RECOVERY_NS);
        x
    }

    /// A store opened at `now` returns no message whose ttl ran out: those are neither owed
    /// nor allowed (a crash may undo the tombstone of an expiry, never the expiry itself).
    fn expire(&mut self, now: i64) {
        for (seq, &d) in &self.deadlines {
            if d <= now {
                self.must.remove(seq);
                self.may.remove(seq);
                self.held.remove(seq);
                if let Some((_, old)) = &mut self.floor_in_flight {
                    old.remove(seq);
                }
            }
        }
    }
}

/// Recovers a store from `image` with `backend` and checks the invariants against the events.
/// The message of an `Err` starts with `recovered first=F last=L;` whenever recovery worked.
pub fn check_image(
    backend: &dyn Backend,
    cfg: &Config,
    image: &FaultFs,
    events: &[Event],
) -> Result<(), String> {
    // 4. recovery never errors on a crash image
    let mut s = open_image(backend, cfg, image)?;
    check_opened(&mut *s, events)
}

/// Opens (recovers) a store on `image` the way [`check_image`] does (the same clock).
pub(crate) fn open_image(
    backend: &dyn Backend,
    cfg: &Config,
    image: &FaultFs,
) -> Result<Box<StreamOps>, String> {
    let clock = ManualClock::new(RECOVERY_NS);
    backend
        .open(image.clone(), cfg.clone(), clock)
        .map_err(|e| format!("recovery failed: {e}"))
}

/// [`check_image`]'s invariants 1-3 and 5 on a store just opened on a crash image.
pub(crate) fn check_opened(s: &mut StreamOps, events: &[Event]) -> Result<(), String> {
    let x = Expect::from_events(events);
    let st = s.state().map_err(|e| format!("state: {e}"))?;
    let fail = |why: String| {
        format!(
            "recovered first={} last={}; {why}",
            st.first_seq, st.last_seq
        )
    };
    // 1./2. the sequence never goes back below what was durable
    if st.last_seq < x.durable_last {
        return Err(fail(format!(
            "expected last >= {} (sequence lost)",
            x.durable_last
        )));
    }
    // 3. every acknowledged message is there, with its payload
    for (&seq, &id) in &x.must {
        match s.get(seq) {
            Ok(m) if payload_id(&m.payload) == Some(id) => {}
            Ok(m) => {
                return Err(fail(format!(
                    "seq {seq} holds id {:?}, expected id {id}",
                    payload_id(&m.payload)
                )))
            }
            Err(e) => return Err(fail(format!("acknowledged seq {seq} missing: {e}"))),
        }
    }
    // 3./1. whatever is there was appended there and not durably removed
    let mut present = 0u64;
    let mut first_present = None;
    let hi = st.last_seq.min(st.first_seq.saturating_add(10_000));
    for seq in st.first_seq.max(1)..=hi {
        match s.get(seq) {
            Ok(m) => {
                present += 1;
                first_present.get_or_insert(seq);
                let id = payload_id(&m.payload);
                let ok = id.is_some_and(|id| x.may.get(&seq).is_some_and(|v| v.contains(&id)));
                if !ok {
                    return Err(fail(format!(
                        "seq {seq} (id {id:?}) is back although it was removed or never written"
                    )));
                }
            }
            Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(fail(format!("get({seq}): {e}"))),
        }
    }
    if present != st.msgs {
        return Err(fail(format!(
            "state says {} messages, {present} readable",
            st.msgs
        )));
    }
    if st.msgs > 0 && first_present != Some(st.first_seq) {
        return Err(fail(format!(
            "first_seq {} but first message at {first_present:?}",
            st.first_seq
        )));
    }
    if st.msgs == 0 && st.first_seq != st.last_seq + 1 && (st.first_seq, st.last_seq) != (0, 0) {
        return Err(fail("empty stream with first != last + 1".into()));
    }
    // 2. a floor operation in flight: the old state or the new one, never a mix
    if let Some((upto, old)) = &x.floor_in_flight {
        let there = old
            .iter()
            .filter(|(q, id)| {
                s.get(**q)
                    .is_ok_and(|m| payload_id(&m.payload) == Some(**id))
            })
            .count();
        if there > 0 && there < old.len() {
            return Err(fail(format!(
                "{there} of {} acknowledged messages <= {upto} survived: a mix of old and new",
                old.len()
            )));
        }
        if there == 0 && !old.is_empty() && st.last_seq < *upto {
            return Err(fail(format!(
                "acknowledged messages gone but last < {upto}: neither the old nor the new state"
            )));
        }
    }
    // 6. consumers: what was acknowledged durably stays acknowledged
    check_consumers(s, &x.consumers, &st).map_err(fail)?;
    // 5. the next append continues the sequence
    let seq = s
        .append("check.next", b"", b"after recovery")
        .map_err(|e| fail(format!("append after recovery failed: {e}")))?;
    if seq != st.last_seq + 1 {
        return Err(fail(format!(
            "next append got {seq}, expected {}",
            st.last_seq + 1
        )));
    }
    Ok(())
}
