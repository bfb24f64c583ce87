//! A small graph engine: nodes that work on a typed state, plain and
//! conditional edges between them, and a step cap. The engine itself does no
//! I/O: nodes reach the world only through the effects value `E` they are
//! given, so a graph runs in tests with scripted effects. A graph's nodes are
//! the variants of one enum ([`Node`]), each saying what the status line
//! shows while it works, so a route or a status line cannot name a node
//! that does not exist. A conditional edge declares where it may lead, so a
//! graph can be drawn ([`Graph::mermaid`]) and a route it did not declare is
//! an error, not a silent detour; a route to a node the graph was not given
//! stops the run before its first step.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;

use super::run::AgentError;
pub use super::run::{Activity, Observer};

/// A node of a graph: one graph's nodes are the variants of one enum.
pub trait Node: Copy + Eq + Hash + Debug + Send + Sync + 'static {
    /// Its name, as traces, logs and drawings show it.
    fn name(self) -> &'static str;
    /// What it does, as the status line says while it works (none: the
    /// line stays as it was).
    fn activity(self) -> Option<Activity>;
}

/// The future a node returns.
pub type NodeFuture<'a> = Pin<Box<dyn Future<Output = Result<(), AgentError>> + Send + 'a>>;

/// A node: an async step over the state, with the effects it may use.
pub type NodeFn<S, E> = Box<dyn for<'a> Fn(&'a mut S, &'a mut E) -> NodeFuture<'a> + Send + Sync>;

/// Declares a graph's nodes: an enum whose variants each carry a name and
/// what the status line says while they work.
///
/// ```ignore
/// nodes! {
///     /// The nodes of a graph.
///     pub enum Step {
///         Generate = "generate", Some(Activity::Answering);
///         Extract = "extract", None;
///     }
/// }
/// ```
macro_rules! nodes {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($variant:ident = $label:literal, $activity:expr;)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($variant),+
        }

        impl $crate::agent::graph::Node for $name {
            fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $label),+
                }
            }

            fn activity(self) -> Option<$crate::agent::graph::Activity> {
                match self {
                    $(Self::$variant => $activity),+
                }
            }
        }
    };
}
pub(crate) use nodes;

/// Where the graph goes after a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<N> {
    To(N),
    End,
}

type Condition<S, N> = Box<dyn Fn(&S) -> Route<N> + Send + Sync>;

enum Edge<S, N: 'static> {
    Always(Route<N>),
    /// The routes the condition may choose, then the condition.
    When(&'static [Route<N>], Condition<S, N>),
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// An edge led to the end.
    Finished { steps: usize },
    /// The step cap stopped a run that was still going.
    StepCap { steps: usize },
}

/// A graph of nodes `N` over state `S` with effects `E`.
pub struct Graph<S, E, N: Node> {
    entry: N,
    nodes: HashMap<N, NodeFn<S, E>>,
    /// Nodes in the order they were added (how the graph is drawn).
    order: Vec<N>,
    edges: HashMap<N, Edge<S, N>>,
    max_steps: usize,
}

impl<S, E, N> Graph<S, E, N>
where
    S: Send,
    E: Observer + Send,
    N: Node,
{
    /// A graph that starts at `entry` and runs at most `max_steps` nodes.
    pub fn new(entry: N, max_steps: usize) -> Self {
        Self {
            entry,
            nodes: HashMap::new(),
            order: Vec::new(),
            edges: HashMap::new(),
            max_steps,
        }
    }

    pub fn node(mut self, node: N, run: NodeFn<S, E>) -> Self {
        if self.nodes.insert(node, run).is_none() {
            self.order.push(node);
        }
        self
    }

    /// After `from`, always go to `to`.
    pub fn edge(mut self, from: N, to: Route<N>) -> Self {
        self.edges.insert(from, Edge::Always(to));
        self
    }

    /// After `from`, go where `choose` says, given the state: one of `routes`.
    pub fn conditional_edge(
        mut self,
        from: N,
        routes: &'static [Route<N>],
        choose: impl Fn(&S) -> Route<N> + Send + Sync + 'static,
    ) -> Self {
        self.edges
            .insert(from, Edge::When(routes, Box::new(choose)));
        self
    }

    /// The graph as a Mermaid flowchart: plain edges solid, the routes of a
    /// conditional edge dotted.
    pub fn mermaid(&self) -> String {
        let id = |route: Route<N>| match route {
            Route::To(node) => node.name(),
            Route::End => "__end__",
        };
        let mut lines = vec![
            "flowchart TD".to_owned(),
            "    __start__([start])".to_owned(),
        ];
        lines.extend(
            self.order
                .iter()
                .map(|node| format!("    {0}[{0}]", node.name())),
        );
        lines.push("    __end__([end])".to_owned());
        lines.push(format!("    __start__ --> {}", self.entry.name()));
        for node in &self.order {
            let from = node.name();
            match self.edges.get(node) {
                Some(Edge::Always(to)) => lines.push(format!("    {from} --> {}", id(*to))),
                Some(Edge::When(routes, _)) => {
                    lines.extend(
                        routes
                            .iter()
                            .map(|to| format!("    {from} -.-> {}", id(*to))),
                    );
                }
                None => lines.push(format!("    {from} --> __end__")),
            }
        }
        lines.join("\n")
    }

    /// The first node an edge (or the entry) leads to that the graph was
    /// not given, if any.
    pub fn missing_node(&self) -> Option<N> {
        let routes = self.edges.values().flat_map(|edge| match edge {
            Edge::Always(route) => std::slice::from_ref(route),
            Edge::When(routes, _) => routes,
        });
        std::iter::once(self.entry)
            .chain(routes.filter_map(|route| match route {
                Route::To(node) => Some(*node),
                Route::End => None,
            }))
            .chain(self.edges.keys().copied())
            .find(|node| !self.nodes.contains_key(node))
    }

    /// Runs from the entry node until an edge leads to the end, a node fails,
    /// or the step cap is reached. A graph that leads to a node it was not
    /// given fails before its first step.
    pub async fn run(&self, state: &mut S, effects: &mut E) -> Result<RunEnd, AgentError> {
        if let Some(missing) = self.missing_node() {
            return Err(AgentError::Graph(format!(
                "the graph leads to {}, which it has no node for",
                missing.name()
            )));
        }
        let mut current = self.entry;
        let mut steps = 0;
        loop {
            if steps == self.max_steps {
                return Ok(RunEnd::StepCap { steps });
            }
            let node = self
                .nodes
                .get(&current)
                .ok_or_else(|| AgentError::Graph(format!("no node named {}", current.name())))?;
            effects.node_started(current.name(), current.activity());
            node(state, effects).await?;
            effects.node_finished(current.name());
            steps += 1;
            let route = match self.edges.get(&current) {
                Some(Edge::Always(route)) => *route,
                Some(Edge::When(routes, choose)) => {
                    let route = choose(state);
                    if !routes.contains(&route) {
                        return Err(AgentError::Graph(format!(
                            "{} chose {route:?}, which its edge does not declare",
                            current.name()
                        )));
                    }
                    route
                }
                None => Route::End,
            };
            match route {
                Route::To(next) => current = next,
                Route::End => return Ok(RunEnd::Finished { steps }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    enum Step {
        A,
        B,
        C,
        Nowhere,
    }

    impl Node for Step {
        fn name(self) -> &'static str {
            match self {
                Step::A => "a",
                Step::B => "b",
                Step::C => "c",
                Step::Nowhere => "nowhere",
            }
        }
        fn activity(self) -> Option<Activity> {
            (self == Step::B).then_some(Activity::Reviewing)
        }
    }

    use Step::{A, B, C, Nowhere};

    #[derive(Default)]
    struct Counter {
        visits: Vec<&'static str>,
        value: u32,
    }

    #[derive(Default)]
    struct Log(Vec<String>);

    impl Observer for Log {
        fn node_started(&mut self, node: &'static str, activity: Option<Activity>) {
            self.0.push(format!("start {node} {activity:?}"));
        }
        fn node_finished(&mut self, node: &'static str) {
            self.0.push(format!("end {node}"));
        }
    }

    fn add(name: &'static str, amount: u32) -> NodeFn<Counter, Log> {
        Box::new(move |state: &mut Counter, _log: &mut Log| {
            Box::pin(async move {
                state.visits.push(name);
                state.value += amount;
                Ok(())
            })
        })
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn plain_and_conditional_edges_loop_until_the_condition_ends_it() {
        let graph = Graph::new(A, 100)
            .node(A, add("a", 1))
            .node(B, add("b", 10))
            .edge(A, Route::To(B))
            .conditional_edge(B, &[Route::To(A), Route::End], |s: &Counter| {
                if s.value < 30 {
                    Route::To(A)
                } else {
                    Route::End
                }
            });
        let (mut state, mut log) = (Counter::default(), Log::default());
        let end = block_on(graph.run(&mut state, &mut log)).unwrap();
        assert_eq!(end, RunEnd::Finished { steps: 6 });
        assert_eq!(state.visits, ["a", "b", "a", "b", "a", "b"]);
        assert_eq!(
            log.0[..4],
            ["start a None", "end a", "start b Some(Reviewing)", "end b"]
        );
    }

    #[test]
    fn the_step_cap_stops_an_endless_graph() {
        let graph = Graph::new(A, 5).node(A, add("a", 1)).edge(A, Route::To(A));
        let (mut state, mut log) = (Counter::default(), Log::default());
        let end = block_on(graph.run(&mut state, &mut log)).unwrap();
        assert_eq!(end, RunEnd::StepCap { steps: 5 });
        assert_eq!(state.value, 5);
    }

    #[test]
    fn a_route_the_edge_did_not_declare_is_an_error() {
        let graph = Graph::new(A, 5)
            .node(A, add("a", 1))
            .node(B, add("b", 1))
            .conditional_edge(A, &[Route::End], |_: &Counter| Route::To(B));
        let (mut state, mut log) = (Counter::default(), Log::default());
        let err = block_on(graph.run(&mut state, &mut log)).unwrap_err();
        assert!(err.to_string().contains("does not declare"), "{err}");
        assert_eq!(state.visits, ["a"]);
    }

    #[test]
    fn the_graph_draws_as_mermaid_in_the_order_nodes_were_added() {
        let graph: Graph<Counter, Log, Step> = Graph::new(A, 5)
            .node(A, add("a", 1))
            .node(B, add("b", 1))
            .node(C, add("c", 1))
            .edge(A, Route::To(B))
            .conditional_edge(B, &[Route::To(A), Route::End], |_: &Counter| Route::End);
        assert_eq!(
            graph.mermaid(),
            "flowchart TD\n    __start__([start])\n    a[a]\n    b[b]\n    c[c]\n    __end__([end])\n    \
             __start__ --> a\n    a --> b\n    b -.-> a\n    b -.-> __end__\n    c --> __end__"
        );
    }

    #[test]
    fn a_route_to_a_node_the_graph_was_not_given_stops_it_before_any_step() {
        let graph = Graph::new(A, 5)
            .node(A, add("a", 1))
            .node(B, add("b", 1))
            .edge(A, Route::To(B))
            .conditional_edge(B, &[Route::To(Nowhere), Route::End], |_: &Counter| {
                Route::End
            });
        assert_eq!(graph.missing_node(), Some(Nowhere));
        let (mut state, mut log) = (Counter::default(), Log::default());
        let err = block_on(graph.run(&mut state, &mut log)).unwrap_err();
        assert!(err.to_string().contains("nowhere"), "{err}");
        assert!(state.visits.is_empty());
    }

    #[test]
    fn an_entry_the_graph_was_not_given_is_missing_too() {
        let graph: Graph<Counter, Log, Step> = Graph::new(C, 5).node(A, add("a", 1));
        assert_eq!(graph.missing_node(), Some(C));
    }
}
