//! A small graph engine: named nodes that work on a typed state, plain and
//! conditional edges between them, and a step cap. The engine itself does no
//! I/O: nodes reach the world only through the effects value `E` they are
//! given, so a graph runs in tests with scripted effects. A conditional edge
//! declares where it may lead, so a graph can be drawn ([`Graph::mermaid`])
//! and a route it did not declare is an error, not a silent detour.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use super::run::AgentError;
pub use super::run::Observer;

/// The future a node returns.
pub type NodeFuture<'a> = Pin<Box<dyn Future<Output = Result<(), AgentError>> + Send + 'a>>;

/// A node: an async step over the state, with the effects it may use.
pub type NodeFn<S, E> = Box<dyn for<'a> Fn(&'a mut S, &'a mut E) -> NodeFuture<'a> + Send + Sync>;

/// Where the graph goes after a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    To(&'static str),
    End,
}

type Condition<S> = Box<dyn Fn(&S) -> Route + Send + Sync>;

enum Edge<S> {
    Always(Route),
    /// The routes the condition may choose, then the condition.
    When(&'static [Route], Condition<S>),
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// An edge led to the end.
    Finished { steps: usize },
    /// The step cap stopped a run that was still going.
    StepCap { steps: usize },
}

/// A graph of nodes over state `S` with effects `E`.
pub struct Graph<S, E> {
    entry: &'static str,
    nodes: HashMap<&'static str, NodeFn<S, E>>,
    /// Node names in the order they were added (how the graph is drawn).
    order: Vec<&'static str>,
    edges: HashMap<&'static str, Edge<S>>,
    max_steps: usize,
}

impl<S, E> Graph<S, E>
where
    S: Send,
    E: Observer + Send,
{
    /// A graph that starts at `entry` and runs at most `max_steps` nodes.
    pub fn new(entry: &'static str, max_steps: usize) -> Self {
        Self {
            entry,
            nodes: HashMap::new(),
            order: Vec::new(),
            edges: HashMap::new(),
            max_steps,
        }
    }

    pub fn node(mut self, name: &'static str, run: NodeFn<S, E>) -> Self {
        if self.nodes.insert(name, run).is_none() {
            self.order.push(name);
        }
        self
    }

    /// After `from`, always go to `to`.
    pub fn edge(mut self, from: &'static str, to: Route) -> Self {
        self.edges.insert(from, Edge::Always(to));
        self
    }

    /// After `from`, go where `choose` says, given the state: one of `routes`.
    pub fn conditional_edge(
        mut self,
        from: &'static str,
        routes: &'static [Route],
        choose: impl Fn(&S) -> Route + Send + Sync + 'static,
    ) -> Self {
        self.edges
            .insert(from, Edge::When(routes, Box::new(choose)));
        self
    }

    /// The graph as a Mermaid flowchart: plain edges solid, the routes of a
    /// conditional edge dotted.
    pub fn mermaid(&self) -> String {
        let id = |route: Route| match route {
            Route::To(node) => node,
            Route::End => "__end__",
        };
        let mut lines = vec![
            "flowchart TD".to_owned(),
            "    __start__([start])".to_owned(),
        ];
        lines.extend(self.order.iter().map(|node| format!("    {node}[{node}]")));
        lines.push("    __end__([end])".to_owned());
        lines.push(format!("    __start__ --> {}", self.entry));
        for from in &self.order {
            match self.edges.get(from) {
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

    /// Runs from the entry node until an edge leads to the end, a node fails,
    /// or the step cap is reached.
    pub async fn run(&self, state: &mut S, effects: &mut E) -> Result<RunEnd, AgentError> {
        let mut current = self.entry;
        let mut steps = 0;
        loop {
            if steps == self.max_steps {
                return Ok(RunEnd::StepCap { steps });
            }
            let node = self
                .nodes
                .get(current)
                .ok_or_else(|| AgentError::Graph(format!("no node named {current}")))?;
            effects.node_started(current);
            node(state, effects).await?;
            effects.node_finished(current);
            steps += 1;
            let route = match self.edges.get(current) {
                Some(Edge::Always(route)) => *route,
                Some(Edge::When(routes, choose)) => {
                    let route = choose(state);
                    if !routes.contains(&route) {
                        return Err(AgentError::Graph(format!(
                            "{current} chose {route:?}, which its edge does not declare"
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

    #[derive(Default)]
    struct Counter {
        visits: Vec<&'static str>,
        value: u32,
    }

    #[derive(Default)]
    struct Log(Vec<String>);

    impl Observer for Log {
        fn node_started(&mut self, node: &'static str) {
            self.0.push(format!("start {node}"));
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
        let graph = Graph::new("a", 100)
            .node("a", add("a", 1))
            .node("b", add("b", 10))
            .edge("a", Route::To("b"))
            .conditional_edge("b", &[Route::To("a"), Route::End], |s: &Counter| {
                if s.value < 30 {
                    Route::To("a")
                } else {
                    Route::End
                }
            });
        let (mut state, mut log) = (Counter::default(), Log::default());
        let end = block_on(graph.run(&mut state, &mut log)).unwrap();
        assert_eq!(end, RunEnd::Finished { steps: 6 });
        assert_eq!(state.visits, ["a", "b", "a", "b", "a", "b"]);
        assert_eq!(log.0[..2], ["start a", "end a"]);
    }

    #[test]
    fn the_step_cap_stops_an_endless_graph() {
        let graph = Graph::new("a", 5)
            .node("a", add("a", 1))
            .edge("a", Route::To("a"));
        let (mut state, mut log) = (Counter::default(), Log::default());
        let end = block_on(graph.run(&mut state, &mut log)).unwrap();
        assert_eq!(end, RunEnd::StepCap { steps: 5 });
        assert_eq!(state.value, 5);
    }

    #[test]
    fn a_route_the_edge_did_not_declare_is_an_error() {
        let graph = Graph::new("a", 5)
            .node("a", add("a", 1))
            .node("b", add("b", 1))
            .conditional_edge("a", &[Route::End], |_: &Counter| Route::To("b"));
        let (mut state, mut log) = (Counter::default(), Log::default());
        let err = block_on(graph.run(&mut state, &mut log)).unwrap_err();
        assert!(err.to_string().contains("does not declare"), "{err}");
        assert_eq!(state.visits, ["a"]);
    }

    #[test]
    fn the_graph_draws_as_mermaid_in_the_order_nodes_were_added() {
        let graph: Graph<Counter, Log> = Graph::new("a", 5)
            .node("a", add("a", 1))
            .node("b", add("b", 1))
            .node("c", add("c", 1))
            .edge("a", Route::To("b"))
            .conditional_edge("b", &[Route::To("a"), Route::End], |_: &Counter| Route::End);
        assert_eq!(
            graph.mermaid(),
            "flowchart TD\n    __start__([start])\n    a[a]\n    b[b]\n    c[c]\n    __end__([end])\n    \
             __start__ --> a\n    a --> b\n    b -.-> a\n    b -.-> __end__\n    c --> __end__"
        );
    }

    #[test]
    fn a_missing_node_is_an_error_not_a_panic() {
        let graph = Graph::new("a", 5)
            .node("a", add("a", 1))
            .edge("a", Route::To("nowhere"));
        let (mut state, mut log) = (Counter::default(), Log::default());
        let err = block_on(graph.run(&mut state, &mut log)).unwrap_err();
        assert!(err.to_string().contains("nowhere"));
    }
}
