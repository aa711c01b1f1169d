//! What the tools offered to the model do: transitions, context reads and writes, spawns and
//! fan-outs, meta tools and the tools built at run time.

use serde_json::{Map, Value, json};

use super::*;

/// Why a tool call the model made failed: the text goes back to the model as the tool's error.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A second transition in one answer.
    #[error("A transition to {first} was already chosen in this answer")]
    AlreadyChosen {
        /// The transition chosen first.
        first: String,
    },
    /// A tool that is not offered here.
    #[error("Unknown tool: {0}")]
    Unknown(String),
    /// A transition whose conditions are all false now.
    #[error(
        "The transition to {target} is not open: its condition does not hold now ({conditions})"
    )]
    Closed {
        /// Its target.
        target: String,
        /// Its conditions, joined.
        conditions: String,
    },
    /// A context write without an object of fields.
    #[error("`data` must be an object of fields to write")]
    WriteNotAnObject,
    /// A context write the context's declared attributes refuse.
    #[error(transparent)]
    WriteRefused(#[from] tools::WriteRefused),
    /// A fan-out to a target without an `@map` edge.
    #[error("No @map edge from {node} to {target}")]
    NoMapEdge {
        /// The node of the call.
        node: String,
        /// The target asked for.
        target: String,
    },
    /// A fan-out whose list cannot be found.
    #[error(transparent)]
    Map(#[from] MapError),
    /// `update_definition` with something that is not a machine.
    #[error(
        "Invalid machine structure. The machine needs `title` (a string), `nodes` and `edges` (arrays)"
    )]
    InvalidMachine,
    /// `update_definition` with a machine that lost a node a path stands on.
    #[error("The new machine has no node {node} where path {path} stands")]
    NodeRemoved {
        /// The node.
        node: String,
        /// The path standing on it.
        path: String,
    },
    /// A tool to build with a name that is not a tool name.
    #[error("Invalid tool name \"{0}\": use letters, digits, _ and - (at most 64)")]
    InvalidName(String),
    /// A tool to build with the name of a built-in tool.
    #[error("Tool name \"{0}\" is reserved")]
    ReservedName(String),
    /// A tool to build with a strategy that does not exist.
    #[error("Unknown implementation strategy \"{0}\"")]
    UnknownStrategy(String),
    /// `build_tool_from_node` naming no tool node.
    #[error("No tool node named \"{0}\"")]
    NoToolNode(String),
    /// A built tool's code failed.
    #[error("Tool {tool} failed: {error}")]
    Failed {
        /// The tool.
        tool: String,
        /// What its code raised.
        error: js::JsError,
    },
    /// A built tool whose strategy cannot run.
    #[error("Tools with the {0} strategy cannot be run yet; build it with code_generation")]
    NotRunnable(String),
}

/// Why a fan-out (`@map`) found no list to spread.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// The edge names no list.
    #[error("No source array specified for the map")]
    NoSource,
    /// The list named is not there.
    #[error("Failed to resolve source \"{0}\": not found")]
    Unresolved(String),
    /// What is there is not a list.
    #[error("Source \"{list}\" is not an array (got {got})")]
    NotAnArray {
        /// The list named.
        list: String,
        /// The JSON type found.
        got: &'static str,
    },
}

impl Executor<'_> {
    // ---- tools -----------------------------------------------------------------------------

    /// Runs one tool call of path `path` at `node`; a transition is only noted in `chosen` (the
    /// turn moves after the whole answer).
    pub(super) fn run_tool(
        &mut self,
        path: &str,
        node: &str,
        name: &str,
        args: &Value,
        chosen: &mut Option<String>,
    ) -> Result<Value, ToolError> {
        if let Some(target) = name.strip_prefix(tools::TRANSITION) {
            return self.choose_transition(path, node, name, target, args, chosen);
        }
        if let Some(ctx) = name.strip_prefix(tools::READ) {
            return Ok(self.read_context(ctx, args));
        }
        if let Some(ctx) = name.strip_prefix(tools::WRITE) {
            return self.write_context(ctx, args);
        }
        if let Some(target) = name.strip_prefix(tools::SPAWN) {
            let new = self.new_path(path, target, None);
            return Ok(
                json!({"success": true, "action": "spawn_async", "pathId": new,
                "target": target, "status": "spawned",
                "reason": args.get("reason").cloned().unwrap_or(Value::Null)}),
            );
        }
        if let Some(target) = name.strip_prefix(tools::MAP) {
            return self.spread(path, node, target, args);
        }
        self.run_meta_or_built(node, name, args)
    }

    /// `transition_to_<target>`: allowed when one of the edges to `target` is open now.
    fn choose_transition(
        &self,
        path: &str,
        node: &str,
        name: &str,
        target: &str,
        args: &Value,
        chosen: &mut Option<String>,
    ) -> Result<Value, ToolError> {
        if let Some(first) = chosen {
            return Err(ToolError::AlreadyChosen {
                first: first.clone(),
            });
        }
        let edges: Vec<&Edge> = self
            .choice_edges(node)
            .into_iter()
            .filter(|e| e.target == target)
            .collect();
        if edges.is_empty() {
            return Err(ToolError::Unknown(name.to_string()));
        }
        if !edges.iter().any(|e| self.edge_open(path, e)) {
            let conditions: Vec<String> = edges.iter().filter_map(|e| e.condition()).collect();
            return Err(ToolError::Closed {
                target: target.to_string(),
                conditions: conditions.join("; "),
            });
        }
        *chosen = Some(target.to_string());
        Ok(
            json!({"success": true, "action": "transition", "target": target,
            "reason": args.get("reason").cloned().unwrap_or(Value::Null)}),
        )
    }

    /// `read_<context>`: its values, or the fields asked for.
    fn read_context(&self, ctx: &str, args: &Value) -> Value {
        let values = self
            .state
            .context_state
            .get(ctx)
            .cloned()
            .unwrap_or_else(|| json!({}));
        let data = match args.get("fields").and_then(Value::as_array) {
            Some(fields) if !fields.is_empty() => {
                let mut m = Map::new();
                for f in fields.iter().filter_map(Value::as_str) {
                    if let Some(v) = values.get(f) {
                        m.insert(f.to_string(), v.clone());
                    }
                }
                Value::Object(m)
            }
            _ => values,
        };
        json!({"success": true, "context": ctx, "data": data})
    }

    /// `write_<context>`: merges the fields given, checked against the declared attributes.
    fn write_context(&mut self, ctx: &str, args: &Value) -> Result<Value, ToolError> {
        let Some(Value::Object(data)) = args.get("data") else {
            return Err(ToolError::WriteNotAnObject);
        };
        if let Some(context) = self.machine.node(ctx) {
            tools::check_context_write(context, data)?;
        }
        let entry = self
            .state
            .context_state
            .entry(ctx.to_string())
            .or_insert_with(|| json!({}));
        if !entry.is_object() {
            *entry = json!({});
        }
        if let Value::Object(m) = entry {
            for (k, v) in data {
                m.insert(k.clone(), v.clone());
            }
        }
        let written: Vec<&String> = data.keys().collect();
        Ok(
            json!({"success": true, "action": "context_write", "context": ctx,
            "written": written, "values": data}),
        )
    }

    /// `map_spawn_to_<target>`: one path per item of the edge's list (or the one given).
    fn spread(
        &mut self,
        path: &str,
        node: &str,
        target: &str,
        args: &Value,
    ) -> Result<Value, ToolError> {
        let edge = self
            .machine
            .outgoing(node)
            .into_iter()
            .find(|e| e.target == target && e.map_source().is_some())
            .cloned()
            .ok_or_else(|| ToolError::NoMapEdge {
                node: node.to_string(),
                target: target.to_string(),
            })?;
        let source = args
            .get("source")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| edge.map_source())
            .unwrap_or_default();
        let ids = self.map_spawn(path, &edge, &source)?;
        let group = edge.map_group().unwrap_or_else(|| source.replace('.', "_"));
        Ok(
            json!({"success": true, "action": "map_spawn", "target": target,
            "groupId": group, "count": ids.len(), "pathIds": ids}),
        )
    }

    /// The meta tools, and the tools built during the execution.
    fn run_meta_or_built(
        &mut self,
        node: &str,
        name: &str,
        args: &Value,
    ) -> Result<Value, ToolError> {
        match name {
            "get_machine_definition" => Ok(self.get_definition(args)),
            "update_definition" => self.update_definition(args),
            "construct_tool" => self.construct_tool(args),
            "list_available_tools" => Ok(self.list_tools(args)),
            "propose_tool_improvement" => {
                let proposal = json!({
                    "tool_name": args.get("tool_name"),
                    "rationale": args.get("rationale"),
                    "proposed_changes": args.get("proposed_changes"),
                    "node": node,
                    "timestamp": (self.options.clock)(),
                });
                self.state.proposals.push(proposal.clone());
                Ok(json!({"success": true, "message": "Proposal recorded", "proposal": proposal}))
            }
            "get_tool_nodes" => Ok(self.tool_nodes()),
            "build_tool_from_node" => self.build_tool_from_node(args),
            _ => match self
                .state
                .dynamic_tools
                .iter()
                .find(|t| t.name == name)
                .cloned()
            {
                Some(t) => self.run_dynamic(&t, args),
                None => Err(ToolError::Unknown(name.to_string())),
            },
        }
    }

    pub(super) fn get_definition(&self, args: &Value) -> Value {
        let format = args.get("format").and_then(Value::as_str).unwrap_or("both");
        let dsl = || dygram_core::render::dsl::to_dsl(&self.state.machine_snapshot);
        match format {
            "json" => json!({"json": self.state.machine_snapshot}),
            "dsl" => json!({"dsl": dsl()}),
            _ => json!({"json": self.state.machine_snapshot, "dsl": dsl()}),
        }
    }

    pub(super) fn update_definition(&mut self, args: &Value) -> Result<Value, ToolError> {
        let machine = args.get("machine").cloned().unwrap_or(Value::Null);
        let ok = machine.get("title").is_some_and(Value::is_string)
            && machine.get("nodes").is_some_and(Value::is_array)
            && machine.get("edges").is_some_and(Value::is_array);
        if !ok {
            return Err(ToolError::InvalidMachine);
        }
        let candidate = MachineIndex::from_json(&machine);
        for p in &self.state.paths {
            if matches!(p.status, PathStatus::Active | PathStatus::Waiting)
                && candidate.node(&p.current_node).is_none()
            {
                return Err(ToolError::NodeRemoved {
                    node: p.current_node.clone(),
                    path: p.id.clone(),
                });
            }
        }
        self.state.machine_snapshot = machine;
        self.machine = candidate;
        self.machine_changed = true;
        Ok(
            json!({"success": true, "message": "Machine definition updated",
            "reason": args.get("reason"), "dsl": dygram_core::render::dsl::to_dsl(&self.state.machine_snapshot)}),
        )
    }

    pub(super) fn register(&mut self, tool: DynamicTool) -> Result<(), ToolError> {
        if !tools::valid_name(&tool.name) {
            return Err(ToolError::InvalidName(tool.name));
        }
        let taken = tools::META_TOOLS.contains(&tool.name.as_str())
            || [
                tools::TRANSITION,
                tools::READ,
                tools::WRITE,
                tools::SPAWN,
                tools::MAP,
            ]
            .iter()
            .any(|p| tool.name.starts_with(p));
        if taken {
            return Err(ToolError::ReservedName(tool.name));
        }
        if !["code_generation", "agent_backed", "composition"].contains(&tool.strategy.as_str()) {
            return Err(ToolError::UnknownStrategy(tool.strategy));
        }
        // The tool is kept in the machine as a `tool` node too.
        if let Some(Value::Array(nodes)) = self.state.machine_snapshot.get_mut("nodes") {
            nodes.retain(|n| n.get("name").and_then(Value::as_str) != Some(tool.name.as_str()));
            nodes.push(json!({
                "name": tool.name,
                "type": "tool",
                "attributes": [
                    {"name": "description", "type": "string", "value": tool.description},
                    {"name": "input_schema", "value": tool.input_schema},
                    {"name": "implementation_strategy", "type": "string", "value": tool.strategy},
                    {"name": "implementation", "type": "string", "value": tool.implementation},
                ],
            }));
        }
        self.state.dynamic_tools.retain(|t| t.name != tool.name);
        self.state.dynamic_tools.push(tool);
        self.machine = MachineIndex::from_json(&self.state.machine_snapshot);
        self.machine_changed = true;
        Ok(())
    }

    pub(super) fn construct_tool(&mut self, args: &Value) -> Result<Value, ToolError> {
        let s = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let tool = DynamicTool {
            name: s("name"),
            description: s("description"),
            input_schema: args.get("input_schema").cloned().unwrap_or(json!({})),
            strategy: s("implementation_strategy"),
            implementation: s("implementation_details"),
        };
        let summary =
            json!({"name": tool.name, "description": tool.description, "strategy": tool.strategy});
        let name = tool.name.clone();
        self.register(tool)?;
        Ok(
            json!({"success": true, "message": format!("Tool '{name}' constructed and registered"),
            "tool": summary, "dsl": dygram_core::render::dsl::to_dsl(&self.state.machine_snapshot)}),
        )
    }

    pub(super) fn list_tools(&self, args: &Value) -> Value {
        let filter = args
            .get("filter_type")
            .and_then(Value::as_str)
            .unwrap_or("all");
        let source = args.get("include_source").and_then(Value::as_bool) == Some(true);
        let dynamic: Vec<Value> = if matches!(filter, "all" | "dynamic") {
            self.state
                .dynamic_tools
                .iter()
                .map(|t| {
                    let mut v = json!({"name": t.name, "description": t.description, "type": "dynamic",
                        "strategy": t.strategy});
                    if source {
                        v["source"] = json!(t.implementation);
                    }
                    v
                })
                .collect()
        } else {
            Vec::new()
        };
        let meta: Vec<Value> = if matches!(filter, "all" | "meta") {
            tools::META_TOOLS
                .iter()
                .map(|n| json!({"name": n, "description": tools::meta_description(n), "type": "meta"}))
                .collect()
        } else {
            Vec::new()
        };
        let total = dynamic.len() + meta.len();
        json!({"dynamicTools": dynamic, "metaTools": meta, "totalCount": total})
    }

    pub(super) fn tool_nodes(&self) -> Value {
        let nodes: Vec<Value> = self
            .machine
            .nodes
            .iter()
            .filter(|n| n.ty.as_deref() == Some("tool"))
            .map(|n| {
                json!({"name": n.name, "attributes": Value::Object(n.attribute_object()),
                    "registered": self.state.dynamic_tools.iter().any(|t| t.name == n.name)})
            })
            .collect();
        json!({"toolNodes": nodes, "count": nodes.len()})
    }

    pub(super) fn build_tool_from_node(&mut self, args: &Value) -> Result<Value, ToolError> {
        let name = args
            .get("tool_name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let node = self
            .machine
            .node(&name)
            .filter(|n| n.ty.as_deref() == Some("tool"))
            .cloned()
            .ok_or_else(|| ToolError::NoToolNode(name.clone()))?;
        let text = |k: &str| node.attribute(k).map(prompt::display);
        let tool = DynamicTool {
            name: name.clone(),
            description: text("description")
                .or_else(|| text("title"))
                .unwrap_or_default(),
            input_schema: args
                .get("input_schema")
                .cloned()
                .or_else(|| node.attribute("input_schema").cloned())
                .unwrap_or(json!({"type": "object", "properties": {}})),
            strategy: args
                .get("strategy")
                .and_then(Value::as_str)
                .unwrap_or("agent_backed")
                .to_string(),
            implementation: args
                .get("implementation_details")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| text("implementation"))
                .unwrap_or_default(),
        };
        let summary =
            json!({"name": tool.name, "description": tool.description, "strategy": tool.strategy});
        self.register(tool)?;
        Ok(
            json!({"success": true, "message": format!("Tool '{name}' built from its node and registered"),
            "tool": summary}),
        )
    }

    pub(super) fn run_dynamic(&self, tool: &DynamicTool, args: &Value) -> Result<Value, ToolError> {
        match tool.strategy.as_str() {
            "code_generation" => match js::run(&tool.implementation, args, &self.options.js_limits)
            {
                Ok(Some(result)) => Ok(json!({"success": true, "result": result})),
                Ok(None) => Ok(json!({"success": true, "result": null,
                    "message": "Code executed but returned no value"})),
                Err(error) => Err(ToolError::Failed {
                    tool: tool.name.clone(),
                    error,
                }),
            },
            "agent_backed" => Ok(json!({"success": true, "tool": tool.name,
                "message": "This tool is carried out by you, the model: follow its instructions with the input given",
                "instructions": tool.implementation, "input": args})),
            other => Err(ToolError::NotRunnable(other.to_string())),
        }
    }
}
