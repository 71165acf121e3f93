//! Consumers in the crash matrix: the runner's consumer steps, and the checker's consumer
//! invariant — **what a consumer acknowledged durably survives any crash: the ack floor
//! never goes back and an acked message is never redelivered as new** — with the stronger
//! check behind it: the recovered state of every consumer is one the workload went through
//! since its last durable point (brought in line with the recovered stream).

use crate::*;
use seqstore_core::AckPolicy;
use std::collections::BTreeSet;

/// Per consumer: the states a crash image may hold, oldest first, each with the consumer's
/// ack policy; the first is the last durable one (`None`: absent).
pub(crate) type Candidates = BTreeMap<&'static str, Vec<Option<(AckPolicy, ConsumerState)>>>;

/// Folds one event into the candidates.
pub(crate) fn note_consumer_event(c: &mut Candidates, ev: &Event) {
    match ev {
        Event::Consumer {
            name,
            ack,
            state,
            durable,
        } => {
            let v = c.entry(name).or_insert_with(|| vec![None]);
            if *durable {
                v.clear();
            }
            v.push(state.clone().map(|st| (*ack, st)));
        }
        Event::Synced => {
            for v in c.values_mut() {
                let last = v.pop().expect("never empty");
                *v = vec![last];
            }
        }
        _ => {}
    }
}

fn policy(name: &str) -> AckPolicy {
    match name {
        "all" => AckPolicy::All,
        "none" => AckPolicy::None,
        _ => AckPolicy::Explicit,
    }
}

/// What a consumer call does to `st` (the consumer's state as `consumer_state` reported
/// it), by store-core's state machine: the prediction the checker holds the store to.
fn predict(
    st: Option<ConsumerState>,
    call: &ConsumerCall<'_>,
    ack_policy: AckPolicy,
    first: u64,
    last: u64,
) -> Result<Option<ConsumerState>, Error> {
    let cfg = |n: &str| ConsumerConfig {
        ack_policy,
        ..ConsumerConfig::new(n)
    };
    let mut st = st.unwrap_or_default();
    match *call {
        ConsumerCall::Add(_) => {
            st = ConsumerState::default();
            st.clamp_to_stream(ack_policy, first, last);
        }
        ConsumerCall::Delivered(n, d, q, dc, ts) => st.update_delivered(&cfg(n), d, q, dc, ts)?,
        ConsumerCall::Ack(n, d, q) => st.update_acks(&cfg(n), d, q)?,
        ConsumerCall::Reset(_, start) => {
            st = ConsumerState::starting_at(start);
            st.clamp_to_stream(ack_policy, first, last);
        }
        ConsumerCall::Delete(_) => return Ok(None),
        ConsumerCall::State(_) => {}
    }
    Ok(Some(st))
}

impl Runner<'_> {
    fn policy_of(&self, name: &str) -> AckPolicy {
        self.consumer_names
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(AckPolicy::Explicit, |(_, p)| *p)
    }

    /// Runs one consumer step and notes the consumer's state after it.
    pub(crate) fn consumer_step(
        &mut self,
        fs: &FaultFs,
        step: &Step,
        j: &mut Journal<Event>,
    ) -> Result<(), String> {
        let e = |e: Error| format!("{step:?}: {e}");
        let name = match *step {
            Step::ConsumerAdd(n, _)
            | Step::Deliver(n)
            | Step::Redeliver(n)
            | Step::Ack(n, _)
            | Step::ConsumerReset(n, _)
            | Step::ConsumerDelete(n) => n,
            _ => return Err(format!("{step:?} is not a consumer step")),
        };
        let st = self.consumer_now(name).map_err(e)?;
        let stream = self.store()?.state().map_err(e)?;
        let add = match *step {
            Step::ConsumerAdd(n, p) => ConsumerConfig {
                ack_policy: policy(p),
                ..ConsumerConfig::new(n)
            },
            _ => ConsumerConfig::new(name),
        };
        let ts = seqstore_core::Clock::now_ns(&self.clock);
        let Some(call) = self.choose_call(step, name, &st, stream.last_seq, &add, ts) else {
            // nothing to act on: nothing runs, nothing is promised
            return Ok(());
        };
        // from here a crash image may hold the call's effect: note what it will be
        let (first, last) = (stream.first_seq.max(1), stream.last_seq);
        let ack = match call {
            ConsumerCall::Add(c) => c.ack_policy,
            _ => self.policy_of(name),
        };
        let predicted = predict(st.clone(), &call, ack, first, last).map_err(e)?;
        let ev = |state, durable| Event::Consumer {
            name,
            ack,
            state,
            durable,
        };
        // The state before the call as the consumer showed it (the stream's removals since
        // its last call acknowledged): the call first records those acknowledgements, and a
        // crash may keep them without the call's own record — or without an unsynced removal
        // they came from, when the journal's write reached the disk and the block's did not.
        j.note(fs, ev(st.clone(), false));
        j.note(fs, ev(predicted.clone(), false));
        consumer_call(&mut **self.store()?, call).map_err(e)?;
        let state = self.consumer_now(name).map_err(e)?;
        if state != predicted {
            return Err(format!(
                "{step:?}: the store holds {state:?}, the state machine says {predicted:?}"
            ));
        }
        j.note(fs, ev(state, self.cfg.sync == SyncPolicy::Always));
        Ok(())
    }

    /// The consumer's state now (`None`: it does not exist).
    fn consumer_now(&mut self, name: &'static str) -> Result<Option<ConsumerState>, Error> {
        let s = self
            .store()
            .map_err(|m| Error::InvalidArgument(m.clone()))?;
        match s.consumer_state(name).map(Some) {
            Ok(st) => Ok(st),
            Err(Error::ConsumerNotFound { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The call a consumer step makes on the consumer's state `st` (`None`: nothing to act
    /// on — no new message to deliver, nothing pending, no such consumer, or an add of one
    /// that exists, which changes nothing: a random workload may add a name again with
    /// another policy, and is not told no).
    fn choose_call<'a>(
        &mut self,
        step: &Step,
        name: &'a str,
        st: &Option<ConsumerState>,
        last: u64,
        add: &'a ConsumerConfig,
        ts: i64,
    ) -> Option<ConsumerCall<'a>> {
        match (step, st) {
            (&Step::ConsumerAdd(n, _), None) => {
                self.consumer_names.retain(|(x, _)| *x != n);
                self.consumer_names.push((n, add.ack_policy));
                Some(ConsumerCall::Add(add))
            }
            (&Step::Deliver(_), Some(s)) if s.delivered.stream < last => {
                // the next message the stream holds: a removed one is never delivered
                let d = s.delivered;
                let store = self.store().ok()?;
                let q = (d.stream + 1..=last).find(|&q| store.get(q).is_ok())?;
                Some(ConsumerCall::Delivered(name, d.consumer + 1, q, 1, ts))
            }
            (&Step::Redeliver(_), Some(s)) => s.pending.keys().next().map(|&q| {
                let dc = s.redelivered.get(&q).copied().unwrap_or(0) + 2;
                ConsumerCall::Delivered(name, s.delivered.consumer + 1, q, dc, ts)
            }),
            (&Step::Ack(_, k), Some(s)) if !s.pending.is_empty() => {
                let k = k as usize % s.pending.len();
                let (&q, p) = s.pending.iter().nth(k).expect("k < n");
                Some(ConsumerCall::Ack(name, p.sequence, q))
            }
            (&Step::ConsumerReset(_, start), Some(_)) => Some(ConsumerCall::Reset(name, start)),
            (&Step::ConsumerDelete(_), Some(_)) => Some(ConsumerCall::Delete(name)),
            _ => None,
        }
    }

    /// Whether a consumer has delivered past `seq` (a truncate to `seq` then brings it
    /// back, durably).
    pub(crate) fn consumers_ahead(&mut self, seq: u64) -> Result<bool, String> {
        for (n, _) in self.consumer_names.clone() {
            if let Ok(Some(st)) = self.store()?.consumer_state(n).map(Some) {
                if st.delivered.stream > seq {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// After a truncate that brought a consumer back: it wrote a consumer checkpoint, which
    /// made every consumer's state durable.
    pub(crate) fn after_truncate(
        &mut self,
        fs: &FaultFs,
        j: &mut Journal<Event>,
    ) -> Result<(), String> {
        for (name, _) in self.consumer_names.clone() {
            let state = match self.store()?.consumer_state(name).map(Some) {
                Ok(st) => st,
                Err(Error::ConsumerNotFound { .. }) => None,
                Err(e) => return Err(format!("after truncate: {e}")),
            };
            let ev = Event::Consumer {
                name,
                ack: self.policy_of(name),
                state,
                durable: true,
            };
            j.note(fs, ev);
        }
        Ok(())
    }
}

/// The consumer invariant on a store just recovered from a crash image.
pub(crate) fn check_consumers(
    s: &mut StreamOps,
    cands: &Candidates,
    stream: &StreamState,
) -> Result<(), String> {
    let (first, last) = (stream.first_seq.max(1), stream.last_seq);
    for (&name, states) in cands {
        let got = match s.consumer_state(name).map(Some) {
            Ok(st) => st,
            Err(Error::ConsumerNotFound { .. }) => None,
            Err(e) => return Err(format!("consumer {name}: state: {e}")),
        };
        // the pending messages the recovered stream no longer holds: the store shows them
        // acknowledged (NATS's terminations)
        let mut gone = BTreeSet::new();
        for (_, c) in states.iter().flatten() {
            for &q in c.pending.keys() {
                if matches!(s.get(q), Err(Error::NotFound { .. })) {
                    gone.insert(q);
                }
            }
        }
        // A candidate brought in line with the recovered stream, as `consumer_state` does
        // (`ConsumerState::in_line`), at the stream's purge floor + 1. The floor is not in
        // `StreamState`; it is at most `first - 1`, and the states it can give are those of
        // the floors just below a pending message, at the recovered state's floor or
        // delivery, and at 0 and `first - 1` (between those the result does not change).
        let in_line = |c: &Option<(AckPolicy, ConsumerState)>, base: u64| {
            c.clone().map(|(ack, mut c)| {
                c.in_line(ack, base, last, |q| gone.contains(&q));
                c
            })
        };
        let bases = |c: &Option<(AckPolicy, ConsumerState)>| {
            let mut b: BTreeSet<u64> = [1, first].into();
            if let Some(g) = &got {
                b.extend([g.ack_floor.stream + 1, g.delivered.stream + 1]);
            }
            if let Some((_, c)) = c {
                b.extend(c.pending.keys().map(|q| q + 1));
                b.insert(c.ack_floor.stream + 1);
            }
            b.retain(|&x| x <= first);
            b
        };
        if states
            .iter()
            .any(|c| bases(c).into_iter().any(|b| in_line(c, b) == got))
        {
            continue;
        }
        // the explanation: the durable state without a purge floor (the lowest it can be)
        let durable = in_line(&states[0], 1);
        let why = match (&durable, &got) {
            (Some(_), None) => "the consumer is gone although it was durable".to_string(),
            (Some(d), Some(g)) if g.ack_floor.stream < d.ack_floor.stream => format!(
                "ack floor went back: durable {:?}, recovered {:?}",
                d.ack_floor, g.ack_floor
            ),
            (Some(d), Some(g)) => match (first..=d.delivered.stream)
                .find(|&q| d.is_acked(q) && (!g.is_acked(q) || g.is_new(q)))
            {
                Some(q) => format!("acked stream seq {q} is pending or new again"),
                None => format!("recovered {g:?} is no state since the durable {d:?}"),
            },
            (None, g) => format!("recovered {g:?}, no state the workload went through"),
        };
        return Err(format!("consumer {name}: {why}"));
    }
    Ok(())
}
