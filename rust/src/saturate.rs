//! Exploration: equality saturation with single- and multi-pattern rules, limits and cycle
//! filtering (Tensat, MLSys 2021, sections 4 and 5.2).
//!
//! Each iteration searches every single-pattern rule; multi-pattern rules run only in the
//! first `k_multi` iterations, by Tensat's Algorithm 1: the source patterns of all
//! multi-pattern rules are canonicalised (variables renamed in order of appearance) and each
//! distinct one is searched once; a rule's matches are the combinations of its sources'
//! matches that agree on shared variables (a hash join on those variables). A
//! mirror-symmetric rule ([`Rule::is_mirror_symmetric`]: Tensat's merges of two operators
//! that share an input) is applied once per pair of e-classes, not to both orders
//! ([`Config::mirror_once`]).
//!
//! A target is applied only when every new e-node type-checks ([`crate::analysis::infer`])
//! and, under cycle filtering, no new e-node would close a cycle. A target that is an
//! existing e-class below the matched one (a shrinking rule such as `(dropout ?x) => ?x`) is
//! applied: the matched e-class's old e-nodes that the union makes cyclic go on the filter
//! list first ([`cycles::nodes_reaching`]), so the smaller program stays extractable and the
//! unfiltered e-graph acyclic. Exploration stops at the first of:
//! saturation, the iteration limit, the e-node limit (checked while applying, so the
//! e-graph ends within a few e-nodes of it) or the time limit (checked while searching and
//! applying).
//!
//! ```
//! use _core::saturate::{Config, Explorer};
//! let rules = _core::rules::parse("comm: (ewadd ?a ?b) => (ewadd ?b ?a)", "inline").unwrap();
//! let expr = "(ewadd (input x@2) (input y@2))".parse().unwrap();
//! let mut ex = Explorer::new(&expr);
//! let stats = ex.run(&rules, &Config::default());
//! assert_eq!(stats.stop_reason.as_str(), "saturated");
//! assert_eq!(ex.egraph[ex.root].nodes.len(), 2);
//! ```

use crate::analysis::{infer, Data, TensorAnalysis};
use crate::cycles::{self, Descendants, FilterList};
use crate::lang::Mdl;
use crate::merge_tree::{Group, MergeForm};
use crate::rules::{Rule, RuleSet};
use egg::{EGraph, ENodeOrVar, Id, Language, Pattern, RecExpr, Searcher, Subst, Var};
use rustc_hash::FxHashMap;
use std::time::{Duration, Instant};

type EG = EGraph<Mdl, TensorAnalysis>;

/// How cycles are kept out of the extracted program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CycleFilter {
    /// Descendants-map pre-filter per iteration plus DFS post-processing (Tensat default).
    Efficient,
    /// Exact reachability check before every application, plus post-processing.
    Vanilla,
    /// No filtering: the ILP must carry cycle constraints.
    None,
}

impl CycleFilter {
    /// Parse `"efficient" | "vanilla" | "none"`.
    ///
    /// ```
    /// assert!(_core::saturate::CycleFilter::parse("vanilla").is_ok());
    /// assert!(_core::saturate::CycleFilter::parse("fast").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<CycleFilter, String> {
        match s {
            "efficient" => Ok(CycleFilter::Efficient),
            "vanilla" => Ok(CycleFilter::Vanilla),
            "none" => Ok(CycleFilter::None),
            _ => Err(format!(
                "cycle_filter must be \"efficient\", \"vanilla\" or \"none\", got {s:?}"
            )),
        }
    }
}

/// Exploration limits and options. Defaults follow the Tensat paper's evaluation.
#[derive(Debug, Clone)]
pub struct Config {
    /// Iterations in which multi-pattern rules run (default 1).
    pub k_multi: usize,
    /// Stop once the e-graph holds this many e-nodes (default 50,000).
    pub node_limit: usize,
    /// Maximum iterations (default 15).
    pub iter_limit: usize,
    /// Wall-clock limit for exploration (default 60 s).
    pub time_limit: Duration,
    /// Cycle filtering mode (default efficient).
    pub cycle_filter: CycleFilter,
    /// Apply a mirror-symmetric multi-pattern rule ([`Rule::is_mirror_symmetric`]) once per
    /// pair of matched e-classes, not to both orders (default true; `false` is Tensat's
    /// behaviour). The mirrored application only repeats the merge with its concatenation
    /// order reversed, at the same cost; skipping it halves what the merges add (the zoo's
    /// k_multi=2 e-graphs: BERT 46,756 e-nodes at the node limit -> 12,348 saturated).
    pub mirror_once: bool,
    /// In the e-graph's first iteration, also apply each merge rule as a merge tree over
    /// every group of three or more operators it can merge ([`crate::merge_tree`]), unless
    /// a policy selects that iteration's matches ([`Policy::selects`]):
    /// `n - 1` applications merge a group of `n` at once, where pairwise applications
    /// reach `2^k_multi` (default true).
    pub merge_trees: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            k_multi: 1,
            node_limit: 50_000,
            iter_limit: 15,
            time_limit: Duration::from_secs(60),
            cycle_filter: CycleFilter::Efficient,
            mirror_once: true,
            merge_trees: true,
        }
    }
}

/// Why exploration stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// An iteration changed nothing.
    Saturated,
    /// `iter_limit` iterations ran.
    IterLimit,
    /// The e-graph reached `node_limit` e-nodes.
    NodeLimit,
    /// `time_limit` passed.
    TimeLimit,
}

impl StopReason {
    /// `"saturated" | "iter_limit" | "node_limit" | "time_limit"`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Saturated => "saturated",
            StopReason::IterLimit => "iter_limit",
            StopReason::NodeLimit => "node_limit",
            StopReason::TimeLimit => "time_limit",
        }
    }
}

/// Exploration statistics. Times in seconds.
#[derive(Debug, Clone)]
pub struct Stats {
    /// E-nodes at the end.
    pub enodes: usize,
    /// E-classes at the end.
    pub eclasses: usize,
    /// Iterations run (an iteration cut short by a limit counts).
    pub iterations: usize,
    /// Why exploration stopped.
    pub stop_reason: StopReason,
    /// E-nodes on the filter list.
    pub filtered_enodes: usize,
    /// Applications that added or merged something.
    pub applied: usize,
    /// Applications refused because a new e-node did not type-check.
    pub rejected_type: usize,
    /// Applications refused by the cycle pre-filter.
    pub rejected_cycle: usize,
    /// Applications made by merge trees ([`Config::merge_trees`]), counted in `applied` too.
    pub merge_tree_applied: usize,
    /// Total exploration seconds.
    pub explore_seconds: f64,
    /// Seconds searching (pattern matching and multi-pattern joins).
    pub search_seconds: f64,
    /// Seconds applying targets.
    pub apply_seconds: f64,
    /// Seconds rebuilding the e-graph.
    pub rebuild_seconds: f64,
    /// Seconds in cycle filtering (descendants maps and DFS post-processing).
    pub cycle_seconds: f64,
}

/// An e-graph under exploration, with its root and filter list.
pub struct Explorer {
    /// The e-graph.
    pub egraph: EG,
    /// The root e-class (kept canonical by [`Explorer::run`]).
    pub root: Id,
    /// E-nodes excluded from extraction.
    pub filter: FilterList,
    /// Iterations run by earlier calls of [`Explorer::run`] / [`Explorer::run_with`]: a
    /// later call continues the count (multi-pattern rules stay within the first `k_multi`
    /// iterations of the e-graph's life; the filter list records births in order).
    pub iterations_done: usize,
}

/// Decides, at each exploration iteration, which of the matches found are applied
/// (learned guidance, issue 16). The default methods are Tensat's schedule: every match of
/// every single-pattern rule, multi-pattern rules in the first `k_multi` iterations.
pub trait Policy {
    /// Are the multi-pattern rules searched in `iteration` (0-based, counted over the
    /// e-graph's life)? Default: `iteration < k_multi`.
    fn search_multi(&mut self, iteration: usize, k_multi: usize) -> bool {
        iteration < k_multi
    }

    /// Which multi-pattern rules (indices in [`RuleSet::rules`]) are searched in
    /// `iteration` when [`Policy::search_multi`] says they are: `None` (the default) all
    /// of them. Indices of single-pattern rules are ignored.
    fn multi_rules(&mut self, iteration: usize) -> Option<Vec<usize>> {
        let _ = iteration;
        None
    }

    /// Does the policy choose among the matches of `iteration` (then [`Policy::select`] is
    /// called)? Default: no, every match found is applied.
    fn selects(&mut self, iteration: usize) -> bool {
        let _ = iteration;
        false
    }

    /// Which of the `found` matches (rule index in the rule set, matched e-classes, one per
    /// source) are applied (called only when [`Policy::selects`] says so): `None` applies all of them, `Some(keep)` those whose `keep`
    /// entry is true. Called after the search of each iteration.
    fn select(&mut self, ex: &Explorer, iteration: usize, found: &[Found]) -> Option<Vec<bool>> {
        let _ = (ex, iteration, found);
        None
    }
}

/// One match offered to a [`Policy`]: the rule's index in the rule set, the e-class each
/// source matched, and the substitution as (variable, e-class) pairs.
#[derive(Debug, Clone)]
pub struct Found {
    /// Index of the rule in [`RuleSet::rules`].
    pub rule: usize,
    /// The e-class each source pattern matched.
    pub classes: Vec<Id>,
    /// The substitution, variables in order of first appearance in the sources.
    pub subst: Vec<(Var, Id)>,
    /// E-nodes the application would add (0: every target already exists, so it can at
    /// most merge e-classes); `None` when a target does not type-check.
    pub new_nodes: Option<usize>,
}

/// Tensat's schedule: all rules, multi-pattern rules in the first `k_multi` iterations.
pub struct AllRules;

impl Policy for AllRules {}

struct Limits {
    start: Instant,
    time: Duration,
    nodes: usize,
}

impl Limits {
    fn hit(&self, egraph: &EG) -> Option<StopReason> {
        self.hit_reserving(egraph, Duration::ZERO)
    }

    /// As [`Limits::hit`], with `reserve` of the time budget kept back for the work that
    /// must follow (rebuilding and cycle filtering after the applications).
    fn hit_reserving(&self, egraph: &EG, reserve: Duration) -> Option<StopReason> {
        if self.start.elapsed() + reserve >= self.time {
            Some(StopReason::TimeLimit)
        } else if egraph.total_size() >= self.nodes {
            Some(StopReason::NodeLimit)
        } else {
            None
        }
    }
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(Duration::ZERO)
}

/// One application found by searching: the rule, the matched e-class of each source and
/// the substitution.
struct Application<'r> {
    rule: &'r Rule,
    classes: Vec<Id>,
    subst: Subst,
    /// The folded leaf of a constant-folding rule ([`crate::rules::Fold`]), bound to
    /// its `out` variable when applied.
    leaf: Option<Mdl>,
}

impl Application<'_> {
    /// The substitution with a fold's leaf bound to the e-class `leaf_id` gives it.
    fn with_leaf(&self, leaf_id: impl FnOnce(Mdl) -> Option<Id>) -> Option<Subst> {
        let (Some(fold), Some(leaf)) = (&self.rule.fold, &self.leaf) else {
            return None;
        };
        let mut s = self.subst.clone();
        s.insert(fold.out, leaf_id(leaf.clone())?);
        Some(s)
    }
}

impl Application<'_> {
    fn found(&self, egraph: &EG, rule_index: &FxHashMap<*const Rule, usize>) -> Found {
        let folded = self.with_leaf(|l| egraph.lookup(l));
        let full = folded.as_ref().unwrap_or(&self.subst);
        let mut subst: Vec<(Var, Id)> = Vec::new();
        for p in &self.rule.sources {
            for v in p.vars() {
                if !subst.iter().any(|(w, _)| *w == v) {
                    if let Some(id) = self.subst.get(v) {
                        subst.push((v, *id));
                    }
                }
            }
        }
        let mut new_nodes = Some(0);
        for (target, &class) in self.rule.targets.iter().zip(&self.classes) {
            match plan(egraph, target, full) {
                Some(p) if same_type(&egraph[class].data, p.root_data(egraph)) => {
                    let n = p.slots.iter().filter(|s| matches!(s, Slot::New(_))).count();
                    new_nodes = new_nodes.map(|m| m + n);
                }
                _ => new_nodes = None,
            }
        }
        Found {
            rule: rule_index[&(self.rule as *const Rule)],
            classes: self.classes.clone(),
            subst,
            new_nodes,
        }
    }
}

impl Explorer {
    /// Load a program; the last node of `expr` is the root. The program must type-check
    /// (see [`Explorer::type_errors`]).
    pub fn new(expr: &RecExpr<Mdl>) -> Explorer {
        let mut egraph = EG::default();
        let root = egraph.add_expr(expr);
        egraph.rebuild();
        let mut filter = FilterList::default();
        filter.record_births(&egraph, 0);
        Explorer {
            egraph,
            root,
            filter,
            iterations_done: 0,
        }
    }

    /// The first ill-typed node of `expr` (index and message), if any.
    pub fn type_errors(expr: &RecExpr<Mdl>) -> Option<(usize, String)> {
        let mut data: Vec<Data> = Vec::with_capacity(expr.as_ref().len());
        for (i, node) in expr.as_ref().iter().enumerate() {
            match infer(node, |id| &data[usize::from(id)]) {
                Ok(d) => data.push(d),
                Err(e) => return Some((i, e)),
            }
        }
        None
    }

    /// Matches of each rule of `rules` in the current e-graph (conditions checked), in
    /// rule order, without applying anything; multi-pattern rules are counted (their
    /// combined matches; a mirror-symmetric rule once per pair of e-classes) only when
    /// `multi`, else reported as 0.
    pub fn match_counts(&self, rules: &RuleSet, multi: bool) -> Vec<usize> {
        let limits = Limits {
            start: Instant::now(),
            time: Duration::MAX,
            nodes: usize::MAX,
        };
        let index: FxHashMap<*const Rule, usize> = rules
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| (r as *const Rule, i))
            .collect();
        let singles: Vec<&Rule> = rules.rules.iter().filter(|r| !r.is_multi()).collect();
        let mut apps = search_single(&self.egraph, &singles, &limits);
        if multi {
            let multis: Vec<&Rule> = rules.rules.iter().filter(|r| r.is_multi()).collect();
            apps.extend(search_multi(&self.egraph, &multis, &limits, true));
        }
        let mut counts = vec![0; rules.rules.len()];
        for a in &apps {
            counts[index[&(a.rule as *const Rule)]] += 1;
        }
        counts
    }

    /// Run exploration with `rules` under `config` (Tensat's schedule, [`AllRules`]).
    pub fn run(&mut self, rules: &RuleSet, config: &Config) -> Stats {
        self.run_with(rules, config, &mut AllRules)
    }

    /// Run exploration with `rules` under `config`, `policy` choosing the matches applied
    /// in each iteration.
    pub fn run_with(&mut self, rules: &RuleSet, config: &Config, policy: &mut dyn Policy) -> Stats {
        let limits = Limits {
            start: Instant::now(),
            time: config.time_limit,
            nodes: config.node_limit,
        };
        let mut stats = Stats {
            enodes: 0,
            eclasses: 0,
            iterations: 0,
            stop_reason: StopReason::IterLimit,
            filtered_enodes: 0,
            applied: 0,
            rejected_type: 0,
            rejected_cycle: 0,
            merge_tree_applied: 0,
            explore_seconds: 0.0,
            search_seconds: 0.0,
            apply_seconds: 0.0,
            rebuild_seconds: 0.0,
            cycle_seconds: 0.0,
        };
        let rule_index: FxHashMap<*const Rule, usize> = rules
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| (r as *const Rule, i))
            .collect();
        let singles: Vec<&Rule> = rules.rules.iter().filter(|r| !r.is_multi()).collect();
        let multis: Vec<&Rule> = rules.rules.iter().filter(|r| r.is_multi()).collect();
        // What the descendants map (seconds per class squared: it is a bit matrix) and
        // rebuilding plus cycle filtering (seconds per e-node) took in the last iteration:
        // work stops early enough to leave that time, twice over for the latter, within
        // the time limit.
        let (mut desc_per_class2, mut post_per_node) = (0.0f64, 0.0f64);
        // Post-processing seconds per second of applications: 1.5 times the last ratio
        // measured over at least 50 ms of applications; until then 1.2, 1.5 times the 0.8
        // measured on NasRNN's second iteration at k_multi=2 (its first is under 10 ms).
        let mut post_ratio = 1.2f64;
        for iter in 0..config.iter_limit {
            if let Some(r) = limits.hit(&self.egraph) {
                stats.stop_reason = r;
                break;
            }
            stats.iterations = iter + 1;
            let life = self.iterations_done + iter;
            let before = (self.egraph.total_size(), self.egraph.number_of_classes());

            let t = Instant::now();
            let mut apps = search_single(&self.egraph, &singles, &limits);
            let mut trees = Vec::new();
            if policy.search_multi(life, config.k_multi) {
                let searched: Vec<&Rule> = match policy.multi_rules(life) {
                    None => multis.clone(),
                    Some(chosen) => chosen
                        .iter()
                        .filter_map(|&i| rules.rules.get(i))
                        .filter(|r| r.is_multi())
                        .collect(),
                };
                apps.extend(search_multi(
                    &self.egraph,
                    &searched,
                    &limits,
                    config.mirror_once,
                ));
                // A policy that selects matches decides every application: merge trees
                // run under the schedules that apply all matches.
                if config.merge_trees && life == 0 && !policy.selects(life) {
                    trees = merge_groups(&self.egraph, &searched);
                }
            }
            stats.search_seconds += t.elapsed().as_secs_f64();
            if policy.selects(life) {
                let found: Vec<Found> = apps
                    .iter()
                    .map(|a| a.found(&self.egraph, &rule_index))
                    .collect();
                if let Some(keep) = policy.select(self, life, &found) {
                    let mut k = keep.into_iter();
                    apps.retain(|_| k.next().unwrap_or(false));
                }
            }
            // Out of time (keeping back what the descendants map, rebuilding and cycle
            // filtering took per e-node last time): nothing was changed, nothing to filter.
            let classes = self.egraph.number_of_classes() as f64;
            let fixed = desc_per_class2 * classes * classes
                + 2.0 * post_per_node * self.egraph.total_size() as f64;
            if let Some(r) = limits.hit_reserving(&self.egraph, secs(fixed)) {
                stats.stop_reason = r;
                break;
            }

            let t = Instant::now();
            let desc = (config.cycle_filter == CycleFilter::Efficient)
                .then(|| Descendants::new(&self.egraph, &self.filter));
            stats.cycle_seconds += t.elapsed().as_secs_f64();
            desc_per_class2 = t.elapsed().as_secs_f64() / classes.max(1.0).powi(2);

            let t = Instant::now();
            let t_apply = t;
            let mut unions = 0usize;
            let mut stopped = None;
            for app in &apps {
                // Rebuilding grows with what this iteration changed, filtering with the
                // e-graph's size: keep back the larger estimate.
                let by_size = 2.0 * post_per_node * self.egraph.total_size() as f64;
                let by_work = post_ratio * t.elapsed().as_secs_f64();
                let reserve = secs(by_size.max(by_work));
                if let Some(r) = limits.hit_reserving(&self.egraph, reserve) {
                    stopped = Some(r);
                    break;
                }
                let outcome = self.apply(app, config.cycle_filter, desc.as_ref());
                unions += stats.record(&outcome);
            }
            if stopped.is_none() {
                unions += self.apply_merge_trees(&trees, config, &limits, &mut stats);
            }
            stats.apply_seconds += t.elapsed().as_secs_f64();

            let post = Instant::now();
            let t = Instant::now();
            self.egraph.rebuild();
            self.root = self.egraph.find(self.root);
            stats.rebuild_seconds += t.elapsed().as_secs_f64();

            let t = Instant::now();
            self.filter.record_births(&self.egraph, life + 1);
            if config.cycle_filter != CycleFilter::None {
                cycles::filter_cycles(&mut self.egraph, &mut self.filter);
            }
            stats.cycle_seconds += t.elapsed().as_secs_f64();
            let post_secs = post.elapsed().as_secs_f64();
            post_per_node = post_secs / self.egraph.total_size().max(1) as f64;
            let apply_secs = t_apply.elapsed().as_secs_f64() - post_secs;
            if apply_secs > 0.05 {
                post_ratio = (1.5 * post_secs / apply_secs).clamp(0.05, 3.0);
            }

            if let Some(r) = stopped {
                stats.stop_reason = r;
                break;
            }
            let after = (self.egraph.total_size(), self.egraph.number_of_classes());
            if before == after && unions == 0 {
                stats.stop_reason = StopReason::Saturated;
                break;
            }
            if iter + 1 == config.iter_limit {
                stats.stop_reason = StopReason::IterLimit;
            }
        }
        if let Some(r) = limits.hit(&self.egraph) {
            if stats.stop_reason == StopReason::IterLimit {
                stats.stop_reason = r;
            }
        }
        stats.enodes = self.egraph.total_number_of_nodes();
        stats.eclasses = self.egraph.number_of_classes();
        stats.filtered_enodes = self.filter.len();
        self.iterations_done += stats.iterations;
        stats.explore_seconds = limits.start.elapsed().as_secs_f64();
        stats
    }

    /// Applies each group's merge tree (level by level, pairs in the group's order); a
    /// group stops growing at a level where nothing merged. Returns the unions made.
    fn apply_merge_trees(
        &mut self,
        trees: &[(&Rule, MergeForm, Vec<Group>)],
        config: &Config,
        limits: &Limits,
        stats: &mut Stats,
    ) -> usize {
        let mut unions = 0;
        for (rule, form, groups) in trees {
            for group in groups {
                let mut level = group.members.clone();
                while level.len() > 1 {
                    if limits.hit(&self.egraph).is_some() {
                        return unions;
                    }
                    let mut next = Vec::with_capacity(level.len() / 2 + 1);
                    for pair in level.chunks(2) {
                        let [a, b] = pair else {
                            next.push(pair[0].clone());
                            continue;
                        };
                        let subst = form.pair(group, &a.1, &b.1);
                        let merged = if rule.check(&self.egraph, &subst) {
                            let app = Application {
                                rule,
                                classes: vec![a.0, b.0],
                                subst,
                                leaf: None,
                            };
                            // The descendants map predates this iteration's new e-classes:
                            // the exact search checks for cycles.
                            let outcome = self.apply(&app, config.cycle_filter, None);
                            unions += stats.record(&outcome);
                            if matches!(outcome, Outcome::Applied(_)) {
                                stats.merge_tree_applied += 1;
                                form.merged(&self.egraph, rule, &app.subst)
                            } else {
                                None
                            }
                        } else {
                            None
                        };
                        match merged {
                            Some(m) => next.push(m),
                            None => next.extend(pair.iter().cloned()),
                        }
                    }
                    if next.len() == level.len() {
                        break;
                    }
                    level = next;
                }
            }
        }
        unions
    }

    fn apply(
        &mut self,
        app: &Application,
        mode: CycleFilter,
        desc: Option<&Descendants>,
    ) -> Outcome {
        // A fold's leaf is added first (a lone leaf e-class if the target is rejected).
        let folded = app.with_leaf(|l| Some(self.egraph.add(l)));
        let subst = folded.as_ref().unwrap_or(&app.subst);
        // Plan every target first: nothing is added unless all of them type-check.
        let mut plans = Vec::with_capacity(app.rule.targets.len());
        for (target, &class) in app.rule.targets.iter().zip(&app.classes) {
            match plan(&self.egraph, target, subst) {
                Some(p) if same_type(&self.egraph[class].data, p.root_data(&self.egraph)) => {
                    plans.push(p)
                }
                _ => return Outcome::IllTyped,
            }
        }
        // Shrinking unions (target i is an existing e-class below the e-class source i
        // matched): applied, with the old e-nodes they make cyclic put on the filter list.
        let mut shrinking: Vec<(Id, Id)> = Vec::new();
        if mode != CycleFilter::None {
            let below = |from: Id, to: Id| match (mode, desc) {
                (CycleFilter::Efficient, Some(d)) => d.reaches(&self.egraph, from, to),
                _ => cycles::reaches(&self.egraph, &self.filter, from, to),
            };
            for (i, p) in plans.iter().enumerate() {
                for &child in &p.existing_children {
                    if app.classes.iter().any(|&c| below(child, c)) {
                        return Outcome::Cycle;
                    }
                }
                // A target that is an existing class below a matched one would merge a class
                // with its own descendant. Below its own matched class that only makes the
                // matched class's old e-nodes on the way down cyclic (filtered below); below
                // another source's class of a multi-pattern rule it is refused.
                if let Slot::Existing(root) = p.slots[p.slots.len() - 1] {
                    for (j, &c) in app.classes.iter().enumerate() {
                        if self.egraph.find(root) == self.egraph.find(c) || !below(c, root) {
                            continue;
                        }
                        if j != i {
                            return Outcome::Cycle;
                        }
                        shrinking.push((c, root));
                    }
                }
            }
        }
        for &(class, root) in &shrinking {
            for n in cycles::nodes_reaching(&self.egraph, &self.filter, class, root) {
                self.filter.insert(&self.egraph, &n);
            }
        }
        let mut changed = false;
        for (p, &class) in plans.iter().zip(&app.classes) {
            let id = commit(&mut self.egraph, p);
            changed |= self.egraph.union(class, id);
        }
        Outcome::Applied(changed)
    }
}

enum Outcome {
    Applied(bool),
    IllTyped,
    Cycle,
}

impl Stats {
    /// Counts one application's outcome; returns the unions it made (0 or 1).
    fn record(&mut self, outcome: &Outcome) -> usize {
        match outcome {
            Outcome::Applied(changed) => {
                self.applied += 1;
                *changed as usize
            }
            Outcome::IllTyped => {
                self.rejected_type += 1;
                0
            }
            Outcome::Cycle => {
                self.rejected_cycle += 1;
                0
            }
        }
    }
}

#[derive(Clone)]
enum Slot {
    Existing(Id),
    New(Data),
}

/// A target instantiated without touching the e-graph: per pattern node, the e-class it
/// already is, or the data the new e-node will have.
pub(crate) struct Plan<'p> {
    ast: &'p [ENodeOrVar<Mdl>],
    slots: Vec<Slot>,
    subst: Subst,
    /// Existing e-classes that become children of new e-nodes.
    existing_children: Vec<Id>,
}

impl Plan<'_> {
    pub(crate) fn root_data<'a>(&'a self, egraph: &'a EG) -> &'a Data {
        match &self.slots[self.slots.len() - 1] {
            Slot::Existing(id) => &egraph[*id].data,
            Slot::New(d) => d,
        }
    }
}

/// A target may only join an e-class of the same type: same dtype and shape for tensors
/// (split positions may differ), same value for parameters.
pub(crate) fn same_type(a: &Data, b: &Data) -> bool {
    match (a, b) {
        (Data::Tensor(x), Data::Tensor(y)) => x.dtype == y.dtype && x.shape == y.shape,
        (Data::Pair(x), Data::Pair(y)) => x.0.shape == y.0.shape && x.1.shape == y.1.shape,
        (Data::Ks(x), Data::Ks(y)) => x.ty == y.ty,
        _ => a == b,
    }
}

pub(crate) fn plan<'p>(egraph: &EG, target: &'p Pattern<Mdl>, subst: &Subst) -> Option<Plan<'p>> {
    let ast = target.ast.as_ref();
    let mut slots: Vec<Slot> = Vec::with_capacity(ast.len());
    let mut existing_children = Vec::new();
    for node in ast {
        let slot = match node {
            ENodeOrVar::Var(v) => Slot::Existing(*subst.get(*v)?),
            ENodeOrVar::ENode(n) => {
                let all_existing = n
                    .children()
                    .iter()
                    .all(|c| matches!(slots[usize::from(*c)], Slot::Existing(_)));
                let looked = if all_existing {
                    let concrete = n.clone().map_children(|c| match slots[usize::from(c)] {
                        Slot::Existing(id) => id,
                        Slot::New(_) => unreachable!(),
                    });
                    egraph.lookup(concrete)
                } else {
                    None
                };
                match looked {
                    Some(id) => Slot::Existing(id),
                    None => {
                        let data = infer(n, |c| match &slots[usize::from(c)] {
                            Slot::Existing(id) => &egraph[*id].data,
                            Slot::New(d) => d,
                        })
                        .ok()?;
                        for c in n.children() {
                            if let Slot::Existing(id) = slots[usize::from(*c)] {
                                existing_children.push(id);
                            }
                        }
                        Slot::New(data)
                    }
                }
            }
        };
        slots.push(slot);
    }
    Some(Plan {
        ast,
        slots,
        subst: subst.clone(),
        existing_children,
    })
}

fn commit(egraph: &mut EG, p: &Plan) -> Id {
    let mut ids: Vec<Id> = Vec::with_capacity(p.ast.len());
    for (node, slot) in p.ast.iter().zip(&p.slots) {
        let id = match (node, slot) {
            (_, Slot::Existing(id)) => *id,
            (ENodeOrVar::ENode(n), Slot::New(_)) => {
                egraph.add(n.clone().map_children(|c| ids[usize::from(c)]))
            }
            (ENodeOrVar::Var(v), _) => p.subst[*v],
        };
        ids.push(id);
    }
    *ids.last().expect("non-empty target")
}

fn search_single<'r>(egraph: &EG, rules: &[&'r Rule], limits: &Limits) -> Vec<Application<'r>> {
    let mut apps = Vec::new();
    for rule in rules {
        if limits.start.elapsed() >= limits.time {
            break;
        }
        for m in rule.sources[0].search(egraph) {
            for subst in m.substs {
                if rule.check(egraph, &subst) {
                    let leaf = match &rule.fold {
                        Some(f) => match f.leaf(egraph, &subst) {
                            Some(l) => Some(l),
                            None => continue,
                        },
                        None => None,
                    };
                    apps.push(Application {
                        rule,
                        classes: vec![m.eclass],
                        subst,
                        leaf,
                    });
                }
            }
        }
    }
    apps
}

type Matches = Vec<(Id, Vec<Id>)>;

/// The merge rules among `rules` with their groups of three or more operators
/// ([`crate::merge_tree`]).
fn merge_groups<'r>(egraph: &EG, rules: &[&'r Rule]) -> Vec<(&'r Rule, MergeForm, Vec<Group>)> {
    rules
        .iter()
        .filter_map(|&r| {
            let form = MergeForm::of(r)?;
            let groups = form.groups(egraph, r);
            (!groups.is_empty()).then_some((r, form, groups))
        })
        .collect()
}

/// Matches of the multi-pattern `rules` (Tensat Algorithm 1); with `mirror_once`, a
/// mirror-symmetric rule's combinations only in ascending order of their e-classes.
fn search_multi<'r>(
    egraph: &EG,
    rules: &[&'r Rule],
    limits: &Limits,
    mirror_once: bool,
) -> Vec<Application<'r>> {
    // Search each distinct canonical source pattern once.
    let mut found: FxHashMap<String, Matches> = FxHashMap::default();
    let mut shapes: Vec<Vec<(String, Vec<Var>)>> = Vec::with_capacity(rules.len());
    for rule in rules {
        let mut per_rule = Vec::new();
        for src in &rule.sources {
            let (key, order) = crate::rules::canonical(src);
            if !found.contains_key(&key) {
                let mut ms: Matches = Vec::new();
                for m in src.search(egraph) {
                    for s in m.substs {
                        ms.push((m.eclass, order.iter().map(|v| s[*v]).collect()));
                    }
                }
                found.insert(key.clone(), ms);
            }
            per_rule.push((key, order));
        }
        shapes.push(per_rule);
    }
    let mut apps = Vec::new();
    for (rule, srcs) in rules.iter().zip(&shapes) {
        if limits.start.elapsed() >= limits.time {
            break;
        }
        // Partial combinations: matched classes and a substitution over the rule's vars.
        let mut partial: Vec<(Vec<Id>, FxHashMap<Var, Id>)> = vec![(vec![], FxHashMap::default())];
        for (key, order) in srcs {
            let ms = &found[key];
            let bound: Vec<usize> = if let Some((_, first)) = partial.first() {
                (0..order.len())
                    .filter(|&i| first.contains_key(&order[i]))
                    .collect()
            } else {
                vec![]
            };
            // Hash join on the variables already bound.
            let mut by_key: FxHashMap<Vec<Id>, Vec<usize>> = FxHashMap::default();
            for (mi, (_, ids)) in ms.iter().enumerate() {
                let k: Vec<Id> = bound.iter().map(|&i| egraph.find(ids[i])).collect();
                by_key.entry(k).or_default().push(mi);
            }
            let mut next = Vec::new();
            for (classes, sub) in &partial {
                let k: Vec<Id> = bound.iter().map(|&i| egraph.find(sub[&order[i]])).collect();
                if let Some(list) = by_key.get(&k) {
                    for &mi in list {
                        let (class, ids) = &ms[mi];
                        let mut s = sub.clone();
                        for (v, id) in order.iter().zip(ids) {
                            s.insert(*v, *id);
                        }
                        let mut cs = classes.clone();
                        cs.push(*class);
                        next.push((cs, s));
                    }
                }
            }
            partial = next;
        }
        // A mirror-symmetric rule is applied once per pair of e-classes (the mirrored
        // application builds the same operator with its concatenation order reversed).
        let once = mirror_once && rule.is_mirror_symmetric();
        for (classes, sub) in partial {
            // A combination of one e-class with itself merges nothing new.
            if classes
                .iter()
                .all(|c| egraph.find(*c) == egraph.find(classes[0]))
            {
                continue;
            }
            if once && egraph.find(classes[0]) > egraph.find(classes[1]) {
                continue;
            }
            let mut subst = Subst::with_capacity(sub.len());
            for (v, id) in sub {
                subst.insert(v, id);
            }
            if rule.check(egraph, &subst) {
                apps.push(Application {
                    rule,
                    classes,
                    subst,
                    leaf: None,
                });
            }
        }
    }
    apps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::parse;

    fn explore(rules: &str, prog: &str, config: &Config) -> (Explorer, Stats) {
        let rs = parse(rules, "test.rules").unwrap();
        let mut ex = Explorer::new(&prog.parse().unwrap());
        let stats = ex.run(&rs, config);
        (ex, stats)
    }

    fn same_class(ex: &mut Explorer, a: &str, b: &str) -> bool {
        let x = ex.egraph.add_expr(&a.parse().unwrap());
        let y = ex.egraph.add_expr(&b.parse().unwrap());
        ex.egraph.find(x) == ex.egraph.find(y)
    }

    #[test]
    fn constant_folding_adds_the_folded_literal() {
        let rs = crate::rules::constant_folding();
        let prog = "(mul (div (scalar 15.0 float64) (scalar 2.0 float64)) \
                    (sub (scalar 3.0 int64) (scalar 5.0 int64)))";
        let mut ex = Explorer::new(&prog.parse().unwrap());
        ex.run(&rs, &Config::default());
        assert!(same_class(
            &mut ex,
            "(div (scalar 15.0 float64) (scalar 2.0 float64))",
            "(scalar 7.5 float64)"
        ));
        assert!(same_class(
            &mut ex,
            "(sub (scalar 3.0 int64) (scalar 5.0 int64))",
            "(scalar -2.0 int64)"
        ));
        // The folded operands of the product are not both literals of one dtype.
        assert!(!same_class(&mut ex, prog, "(scalar -15.0 float64)"));
    }

    #[test]
    fn constant_folding_of_float32_scalars_rounds_to_float32() {
        let rs = crate::rules::constant_folding();
        let prog = "(mul ?x (div (scalar 1.0 float32) (scalar 3.0 float32)))"
            .replace("?x", "(scalar 6.0 float32)");
        let mut ex = Explorer::new(&prog.parse().unwrap());
        ex.run(&rs, &Config::default());
        let third = f64::from(1.0f32 / 3.0f32);
        assert!(same_class(
            &mut ex,
            "(div (scalar 1.0 float32) (scalar 3.0 float32))",
            &format!("(scalar {third} float32)")
        ));
        assert!(same_class(&mut ex, &prog, "(scalar 2.0 float32)"));
    }

    #[test]
    fn constant_folding_skips_zero_divisors() {
        let rs = crate::rules::constant_folding();
        let prog = "(add (div (scalar 1.0 float64) (scalar 0.0 float64)) (scalar 1.0 float64))";
        let mut ex = Explorer::new(&prog.parse().unwrap());
        let classes = ex.egraph.number_of_classes();
        let stats = ex.run(&rs, &Config::default());
        assert_eq!(stats.applied, 0);
        assert_eq!(ex.egraph.number_of_classes(), classes);
    }

    /// Explores `prog` with the built-in layout rules; returns the explorer and stats.
    fn explore_layout(prog: &str) -> (Explorer, Stats) {
        let rs = crate::rules::layout_rules();
        let mut ex = Explorer::new(&prog.parse().unwrap());
        let stats = ex.run(&rs, &Config::default());
        (ex, stats)
    }

    /// Whether the e-graph holds `expr` as e-nodes already (adds nothing).
    fn holds(ex: &Explorer, expr: &str) -> bool {
        ex.egraph.lookup_expr(&expr.parse().unwrap()).is_some()
    }

    /// The number of `resize` e-nodes in the e-graph.
    fn resizes(ex: &Explorer) -> usize {
        let nodes = ex.egraph.classes().flat_map(|c| &c.nodes);
        nodes.filter(|n| n.is_op("resize")).count()
    }

    #[test]
    fn se_gate_upsample_adds_the_gate_resized_to_the_gated_shape() {
        let prog = "(mul (input x@1_8_4_4) (input g@1_8_1_1))";
        let (mut ex, _) = explore_layout(prog);
        assert_eq!(resizes(&ex), 1);
        let resize = "(resize (input g@1_8_1_1) [1,8,4,4] nearest)";
        assert!(holds(&ex, resize));
        let target = format!("(mul (input x@1_8_4_4) {resize})");
        assert!(holds(&ex, &target));
        assert!(same_class(&mut ex, prog, &target));
    }

    #[test]
    fn se_gate_upsample_takes_the_gate_as_the_left_operand() {
        let prog = "(mul (input g@1_8_1_1) (input x@1_8_4_4))";
        let (mut ex, _) = explore_layout(prog);
        assert_eq!(resizes(&ex), 1);
        let target = "(mul (resize (input g@1_8_1_1) [1,8,4,4] nearest) (input x@1_8_4_4))";
        assert!(holds(&ex, target));
        assert!(same_class(&mut ex, prog, target));
    }

    #[test]
    fn se_gate_upsample_needs_a_broadcast_gate_over_a_larger_image() {
        for prog in [
            // No broadcast: the gate has x's shape.
            "(mul (input x@1_8_4_4) (input g@1_8_4_4))",
            // H * W == 1: nothing to upsample.
            "(mul (input x@1_8_1_1) (input g@1_8_1_1))",
            // Channels differ (the gate broadcasts over channels too).
            "(mul (input x@1_8_4_4) (input g@1_1_1_1))",
        ] {
            let (ex, stats) = explore_layout(prog);
            assert_eq!(stats.applied, 0, "{prog}");
            assert_eq!(resizes(&ex), 0, "{prog}");
        }
    }

    /// Tensat's merge of two matmuls that share their left operand (mirror-symmetric).
    const MATMUL_MERGE: &str = "m: (matmul ?a ?x ?y), (matmul ?a ?x ?z) => \
        (split_0 (split 1 (matmul ?a ?x (concat 1 2 ?y ?z)))), \
        (split_1 (split 1 (matmul ?a ?x (concat 1 2 ?y ?z))))";

    #[test]
    fn multi_pattern_merges_matmuls_sharing_an_input() {
        let rules = MATMUL_MERGE;
        let prog = "(noop (matmul 0 (input x@4_8) (weight a@8_3)) (matmul 0 (input x@4_8) (weight b@8_5)))";
        let (mut ex, stats) = explore(rules, prog, &Config::default());
        assert!(stats.applied >= 1);
        assert!(same_class(
            &mut ex,
            "(matmul 0 (input x@4_8) (weight a@8_3))",
            "(split_0 (split 1 (matmul 0 (input x@4_8) (concat 1 2 (weight a@8_3) (weight b@8_5)))))"
        ));
    }

    /// Four matmuls of one input, their weights `a`..`d` of 3, 5, 7 and 2 columns.
    const FOUR: &str = "(noop (noop (matmul 0 (input x@4_8) (weight a@8_3)) \
        (matmul 0 (input x@4_8) (weight b@8_5))) (noop (matmul 0 (input x@4_8) (weight c@8_7)) \
        (matmul 0 (input x@4_8) (weight d@8_2))))";
    const ALL_FOUR: &str = "(matmul 0 (input x@4_8) (concat 1 2 \
        (concat 1 2 (weight a@8_3) (weight b@8_5)) (concat 1 2 (weight c@8_7) (weight d@8_2))))";

    #[test]
    fn a_merge_tree_merges_a_group_of_four_in_one_iteration() {
        let (mut ex, stats) = explore(MATMUL_MERGE, FOUR, &Config::default());
        assert_eq!(stats.merge_tree_applied, 3);
        let before = ex.egraph.total_number_of_nodes();
        ex.egraph.add_expr(&ALL_FOUR.parse().unwrap());
        assert_eq!(
            ex.egraph.total_number_of_nodes(),
            before,
            "the four-way merge is there"
        );
        // c is the first part of the right half of the merged matmul
        assert!(same_class(
            &mut ex,
            "(matmul 0 (input x@4_8) (weight c@8_7))",
            &format!("(split_0 (split 1 (split_1 (split 1 {ALL_FOUR}))))")
        ));
    }

    #[test]
    fn without_merge_trees_one_iteration_merges_pairs_only() {
        let cfg = Config {
            merge_trees: false,
            ..Config::default()
        };
        let (mut ex, stats) = explore(MATMUL_MERGE, FOUR, &cfg);
        assert_eq!(stats.merge_tree_applied, 0);
        let before = ex.egraph.total_number_of_nodes();
        ex.egraph.add_expr(&ALL_FOUR.parse().unwrap());
        assert!(
            ex.egraph.total_number_of_nodes() > before,
            "the four-way merge is new"
        );
    }

    #[test]
    fn multi_pattern_rules_skip_after_k_multi() {
        let rules = MATMUL_MERGE;
        let prog = "(noop (matmul 0 (input x@4_8) (weight a@8_3)) (matmul 0 (input x@4_8) (weight b@8_5)))";
        let cfg = Config {
            k_multi: 0,
            ..Config::default()
        };
        let (_, stats) = explore(rules, prog, &cfg);
        assert_eq!(stats.applied, 0);
        assert_eq!(stats.stop_reason, StopReason::Saturated);
    }

    #[test]
    fn ill_typed_targets_are_not_applied() {
        // concat of a [2,3] and a [4,5] on axis 0 does not type-check.
        let rules = "bad: (ewadd ?x ?y) => (split_0 (split 0 (concat 0 2 ?x ?y)))";
        let (_, stats) = explore(
            rules,
            "(ewadd (input x@2_3) (input y@2_3))",
            &Config::default(),
        );
        assert_eq!(stats.rejected_type, 0);
        let rules = "bad: (matmul 0 ?x ?y) => (ewadd ?x ?y)";
        let (ex, stats) = explore(
            rules,
            "(matmul 0 (input x@2_3) (input y@3_4))",
            &Config::default(),
        );
        assert_eq!(stats.rejected_type, 1);
        assert_eq!(ex.egraph.total_number_of_nodes(), 6);
    }

    #[test]
    fn target_of_another_shape_never_joins_the_class() {
        let rules = "bad: (split_0 (split 1 (concat 1 2 ?a ?b))) => ?b";
        let prog = "(split_0 (split 1 (concat 1 2 (input a@2_3) (input b@2_5))))";
        let (mut ex, stats) = explore(rules, prog, &Config::default());
        assert_eq!(stats.rejected_type, 1);
        assert!(!same_class(&mut ex, prog, "(input b@2_5)"));
    }

    #[test]
    fn node_limit_stops_exploration_near_the_limit() {
        let rules = "assoc: (ewadd ?x (ewadd ?y ?z)) <=> (ewadd (ewadd ?x ?y) ?z)\n\
            comm: (ewadd ?x ?y) => (ewadd ?y ?x)";
        let prog = "(ewadd (input a@2) (ewadd (input b@2) (ewadd (input c@2) (ewadd (input d@2) (ewadd (input e@2) (input f@2))))))";
        let cfg = Config {
            node_limit: 200,
            ..Config::default()
        };
        let (ex, stats) = explore(rules, prog, &cfg);
        assert_eq!(stats.stop_reason, StopReason::NodeLimit);
        assert!(
            ex.egraph.total_size() < 200 + 200 / 10,
            "{}",
            ex.egraph.total_size()
        );
    }

    /// Greedy tree and DAG extraction from the explorer's root with unit node costs,
    /// honouring the filter list. Returns both extracted programs as s-expressions, after
    /// checking that each choice is complete and acyclic.
    fn extract_unit(ex: &Explorer) -> Vec<String> {
        use crate::extract::{greedy_dag, greedy_tree, is_valid_choice, Problem};
        let eg = &ex.egraph;
        let ids: Vec<Id> = eg.classes().map(|c| c.id).collect();
        let index: FxHashMap<Id, usize> = ids.iter().enumerate().map(|(i, c)| (*c, i)).collect();
        let (mut nodes, mut eclass, mut children, mut forbidden) = (vec![], vec![], vec![], vec![]);
        for (i, &c) in ids.iter().enumerate() {
            for n in &eg[c].nodes {
                forbidden.push(ex.filter.contains(n));
                eclass.push(i);
                children.push(n.children().iter().map(|ch| index[&eg.find(*ch)]).collect());
                nodes.push(n.clone());
            }
        }
        let cost = vec![1.0; nodes.len()];
        let roots = [index[&eg.find(ex.root)]];
        let p = Problem {
            node_eclass: &eclass,
            node_children: &children,
            node_cost: &cost,
            num_classes: ids.len(),
            roots: &roots,
            forbidden: &forbidden,
        };
        [greedy_tree(&p), greedy_dag(&p)]
            .iter()
            .map(|choice| {
                assert!(is_valid_choice(&p, choice), "invalid choice {choice:?}");
                let mut expr: RecExpr<Mdl> = RecExpr::default();
                let mut built: FxHashMap<usize, Id> = FxHashMap::default();
                fn build(
                    c: usize,
                    choice: &[Option<usize>],
                    nodes: &[Mdl],
                    index: &FxHashMap<Id, usize>,
                    eg: &EG,
                    expr: &mut RecExpr<Mdl>,
                    built: &mut FxHashMap<usize, Id>,
                ) -> Id {
                    if let Some(id) = built.get(&c) {
                        return *id;
                    }
                    let n = nodes[choice[c].expect("reached class has a choice")].clone();
                    let n = n.map_children(|ch| {
                        build(index[&eg.find(ch)], choice, nodes, index, eg, expr, built)
                    });
                    let id = expr.add(n);
                    built.insert(c, id);
                    id
                }
                build(roots[0], choice, &nodes, &index, eg, &mut expr, &mut built);
                expr.to_string()
            })
            .collect()
    }

    const FILTERS: [CycleFilter; 3] = [
        CycleFilter::Efficient,
        CycleFilter::Vanilla,
        CycleFilter::None,
    ];

    /// Explore `prog` with `rules` under every cycle filter; every extraction (greedy tree
    /// and DAG) must be `want`, and under filtering the unfiltered e-graph must be acyclic.
    fn shrinks_to(rules: &str, prog: &str, want: &str) {
        shrinks_after(rules, prog, |_| {}, want)
    }

    /// As [`shrinks_to`], with `setup` changing the loaded e-graph before exploration.
    fn shrinks_after(rules: &str, prog: &str, setup: impl Fn(&mut Explorer), want: &str) {
        let rs = parse(rules, "test.rules").unwrap();
        for mode in FILTERS {
            let cfg = Config {
                cycle_filter: mode,
                ..Config::default()
            };
            let mut ex = Explorer::new(&prog.parse().unwrap());
            setup(&mut ex);
            let stats = ex.run(&rs, &cfg);
            assert_eq!(stats.rejected_cycle, 0, "{mode:?}");
            for got in extract_unit(&ex) {
                assert_eq!(got, want, "{mode:?}");
            }
            if mode != CycleFilter::None {
                assert_eq!(
                    cycles::filter_cycles(&mut ex.egraph, &mut ex.filter),
                    0,
                    "{mode:?}: cycle left among unfiltered e-nodes"
                );
                assert!(!ex.filter.is_empty(), "{mode:?}");
            }
        }
    }

    #[test]
    fn relu_of_relu_rule_shrinks_triple_relu_under_every_filter() {
        shrinks_to(
            "relu-relu: (relu (relu ?x)) => (relu ?x)",
            "(relu (relu (relu (input x@4_4))))",
            "(relu (input x@4_4))",
        );
    }

    #[test]
    fn dropout_to_operand_rule_removes_dropout_under_every_filter() {
        shrinks_to(
            "dropout-id: (dropout ?x) => ?x",
            "(tanh (dropout (relu (input x@4_4))))",
            "(tanh (relu (input x@4_4)))",
        );
    }

    #[test]
    fn multiply_by_ones_rule_removes_the_product_under_every_filter() {
        shrinks_to(
            "mul-one: (ewmul ?x (weight one@4_4)) => ?x",
            "(ewmul (ewmul (relu (input x@4_4)) (weight one@4_4)) (weight one@4_4))",
            "(relu (input x@4_4))",
        );
    }

    #[test]
    fn transpose_pair_rule_keeps_the_inner_transpose_extractable() {
        // Both t(x) and t(t(x)) are outputs. The union of t(t(x)) with x makes t(x)'s class
        // and x's class a cycle; filtering t(x)'s only e-node would leave that output
        // unbuildable, so the e-node t(t(x)) in x's class must be the one filtered.
        shrinks_to(
            "tt: (transpose (transpose ?x [1,0]) [1,0]) => ?x",
            "(noop (transpose (input x@2_3) [1,0]) (transpose (transpose (input x@2_3) [1,0]) [1,0]))",
            "(noop (transpose (input x@2_3) [1,0]) (input x@2_3))",
        );
    }

    #[test]
    fn shrinking_union_filters_the_matched_class_enode_not_a_newer_one_below() {
        // Outputs T1 = relu(relu(relu(w))) and T2 = t(T1). Before exploring, t(x) joins T1
        // as a newer e-node. tt unions T2 with x: M = {x, t(T1)} and T1 = {relu.., t(M)}
        // form a cycle whose newest e-node is t(M) in T1. Filtering t(T1) in M instead keeps
        // the cheap t(x) for T1: noop(t(x), x).
        shrinks_after(
            "tt: (transpose (transpose ?x [1,0]) [1,0]) => ?x",
            "(noop (relu (relu (relu (input w@3_2)))) \
                   (transpose (relu (relu (relu (input w@3_2)))) [1,0]))",
            |ex| {
                let t1 = ex
                    .egraph
                    .add_expr(&"(relu (relu (relu (input w@3_2))))".parse().unwrap());
                let tx = ex
                    .egraph
                    .add_expr(&"(transpose (input x@2_3) [1,0])".parse().unwrap());
                ex.egraph.union(t1, tx);
                ex.egraph.rebuild();
                ex.root = ex.egraph.find(ex.root);
                ex.filter.record_births(&ex.egraph, 99);
            },
            "(noop (transpose (input x@2_3) [1,0]) (input x@2_3))",
        );
    }

    /// A policy applying only the matches of one rule, multi-pattern rules searched always.
    struct OnlyRule(usize);

    impl Policy for OnlyRule {
        fn search_multi(&mut self, _: usize, _: usize) -> bool {
            true
        }
        fn selects(&mut self, _: usize) -> bool {
            true
        }
        fn select(&mut self, _: &Explorer, _: usize, found: &[Found]) -> Option<Vec<bool>> {
            Some(found.iter().map(|f| f.rule == self.0).collect())
        }
    }

    /// Searches the multi-pattern rules every iteration but only those listed, and
    /// records the rules of the matches offered.
    struct SearchOnly(Vec<usize>, Vec<usize>);

    impl Policy for SearchOnly {
        fn search_multi(&mut self, _: usize, _: usize) -> bool {
            true
        }
        fn multi_rules(&mut self, _: usize) -> Option<Vec<usize>> {
            Some(self.0.clone())
        }
        fn selects(&mut self, _: usize) -> bool {
            true
        }
        fn select(&mut self, _: &Explorer, _: usize, found: &[Found]) -> Option<Vec<bool>> {
            self.1.extend(found.iter().map(|f| f.rule));
            None
        }
    }

    #[test]
    fn policy_searches_only_the_multi_pattern_rules_it_lists() {
        let (rs, prog) = merge_pair();
        let cfg = Config {
            iter_limit: 1,
            k_multi: 0,
            mirror_once: false,
            ..Config::default()
        };
        for (listed, offered) in [
            (vec![1], vec![0, 1, 1]),
            (vec![], vec![0]),
            (vec![0], vec![0]),
        ] {
            let mut ex = Explorer::new(&prog.parse().unwrap());
            let mut pol = SearchOnly(listed, Vec::new());
            ex.run_with(&rs, &cfg, &mut pol);
            assert_eq!(pol.1, offered);
        }
    }

    /// Records the new e-nodes each match offered would add, applying everything.
    struct Novelty(Vec<Vec<Option<usize>>>);

    impl Policy for Novelty {
        fn selects(&mut self, _: usize) -> bool {
            true
        }
        fn select(&mut self, _: &Explorer, _: usize, found: &[Found]) -> Option<Vec<bool>> {
            self.0.push(found.iter().map(|f| f.new_nodes).collect());
            None
        }
    }

    #[test]
    fn matches_offered_to_a_policy_say_how_many_enodes_they_add() {
        let rules = "comm: (ewadd ?x ?y) => (ewadd ?y ?x)\n\
            bad: (ewadd ?x ?y) => (matmul 0 ?x ?y)";
        let prog = "(ewadd (input a@2_3) (input b@2_3))";
        let rs = parse(rules, "t.rules").unwrap();
        let mut ex = Explorer::new(&prog.parse().unwrap());
        let mut p = Novelty(vec![]);
        ex.run_with(&rs, &Config::default(), &mut p);
        // Iteration 1: comm adds one e-node, bad is ill-typed; iteration 2: both orders
        // of the sum exist, comm adds nothing.
        assert_eq!(p.0[0], vec![Some(1), None]);
        assert_eq!(p.0[1], vec![Some(0), Some(0), None, None]);
    }

    #[test]
    fn all_rules_policy_explores_exactly_like_run() {
        let rules = "assoc: (ewadd ?x (ewadd ?y ?z)) <=> (ewadd (ewadd ?x ?y) ?z)\n\
            comm: (ewadd ?x ?y) => (ewadd ?y ?x)";
        let prog = "(ewadd (input a@2) (ewadd (input b@2) (ewadd (input c@2) (input d@2))))";
        let rs = parse(rules, "t.rules").unwrap();
        let cfg = Config::default();
        let mut a = Explorer::new(&prog.parse().unwrap());
        let sa = a.run(&rs, &cfg);
        let mut b = Explorer::new(&prog.parse().unwrap());
        let sb = b.run_with(&rs, &cfg, &mut AllRules);
        assert_eq!(
            (sa.enodes, sa.eclasses, sa.applied),
            (sb.enodes, sb.eclasses, sb.applied)
        );
        assert_eq!(a.iterations_done, sa.iterations);
    }

    /// A single-pattern rule (0: `comm`) and a matmul merge (1: `m`), and a program with
    /// one match of each (`m` in both orders).
    fn merge_pair() -> (RuleSet, &'static str) {
        let rules = format!("comm: (ewadd ?x ?y) => (ewadd ?y ?x)\n{MATMUL_MERGE}");
        let prog = "(ewadd (matmul 0 (input x@4_8) (weight a@8_3)) (matmul 0 (input x@4_8) (weight b@8_3)))";
        (parse(&rules, "t.rules").unwrap(), prog)
    }

    /// Applications of the multi-pattern rules of `rules` in one iteration on
    /// [`merge_pair`]'s program.
    fn merges_applied(rules: &str, mirror_once: bool) -> usize {
        let rs = parse(rules, "t.rules").unwrap();
        let cfg = Config {
            iter_limit: 1,
            mirror_once,
            ..Config::default()
        };
        let mut ex = Explorer::new(&merge_pair().1.parse().unwrap());
        ex.run(&rs, &cfg).applied
    }

    #[test]
    fn a_mirror_symmetric_merge_is_applied_once_per_pair_of_eclasses() {
        let merge = MATMUL_MERGE;
        assert_eq!(merges_applied(merge, true), 1);
        assert_eq!(
            merges_applied(merge, false),
            2,
            "Tensat's behaviour: both orders"
        );
    }

    #[test]
    fn a_merge_that_is_not_its_own_mirror_is_applied_to_both_orders() {
        // The second target reads the first's concatenation in the other order.
        let merge = "m: (matmul ?a ?x ?y), (matmul ?a ?x ?z) => \
            (split_0 (split 1 (matmul ?a ?x (concat 1 2 ?y ?z)))), \
            (split_0 (split 1 (matmul ?a ?x (concat 1 2 ?z ?y))))";
        assert!(!parse(merge, "t.rules").unwrap().rules[0].is_mirror_symmetric());
        assert_eq!(merges_applied(merge, true), 2);
    }

    #[test]
    fn policy_applies_only_the_matches_it_selects() {
        let (rs, prog) = merge_pair();
        let ex = Explorer::new(&prog.parse().unwrap());
        // The merge is mirror-symmetric: counted once for the pair.
        assert_eq!(ex.match_counts(&rs, true), vec![1, 1]);
        assert_eq!(ex.match_counts(&rs, false), vec![1, 0]);
        let cfg = Config {
            iter_limit: 1,
            k_multi: 0,
            mirror_once: false,
            ..Config::default()
        };
        let mut ex = Explorer::new(&prog.parse().unwrap());
        let st = ex.run_with(&rs, &cfg, &mut OnlyRule(1));
        assert_eq!(
            st.applied, 2,
            "both orders of the multi-pattern match, past k_multi"
        );
        assert_eq!(ex.match_counts(&rs, false)[0], 1, "comm was not applied");
        let mut ex = Explorer::new(&prog.parse().unwrap());
        let st = ex.run_with(&rs, &cfg, &mut OnlyRule(0));
        assert_eq!(st.applied, 1);
    }

    #[test]
    fn cycle_filter_keeps_extractable_graph_acyclic() {
        // x => relu(relu(x))-style growth plus its inverse produce cycles.
        let rules = "r: (relu ?x) <=> (relu (relu ?x))";
        for mode in [CycleFilter::Efficient, CycleFilter::Vanilla] {
            let cfg = Config {
                cycle_filter: mode,
                iter_limit: 4,
                ..Config::default()
            };
            let (mut ex, _) = explore(rules, "(relu (input x@2))", &cfg);
            assert_eq!(cycles::filter_cycles(&mut ex.egraph, &mut ex.filter), 0);
        }
    }
}
