//! What the tools offered to the model do: transitions, context reads and writes, spawns and
//! fan-outs, meta tools and the tools built at run time.

use serde_json::{Value, json};

use super::*;

impl Executor<'_> {
    // ---- tools -----------------------------------------------------------------------------

    pub(super) fn run_tool(
        &mut self,
        path: &str,
        node: &str,
        name: &str,
        args: &Value,
        chosen: &mut Option<String>,
    ) -> Result<Value, String> {
        if let Some(target) = name.strip_prefix(tools::TRANSITION) {
            if let Some(first) = chosen {
                return Err(format!(
                    "A transition to {first} was already chosen in this answer"
                ));
            }
            let edges: Vec<&Edge> = self
                .choice_edges(node)
                .into_iter()
                .filter(|e| e.target == target)
                .collect();
            if edges.is_empty() {
                return Err(format!("Unknown tool: {name}"));
            }
            if !edges.iter().any(|e| self.edge_open(path, e)) {
                let conditions: Vec<String> = edges.iter().filter_map(|e| e.condition()).collect();
                return Err(format!(
                    "The transition to {target} is not open: its condition does not hold now ({})",
                    conditions.join("; ")
                ));
            }
            *chosen = Some(target.to_string());
            return Ok(
                json!({"success": true, "action": "transition", "target": target,
                "reason": args.get("reason").cloned().unwrap_or(Value::Null)}),
            );
        }
        if let Some(ctx) = name.strip_prefix(tools::READ) {
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
            return Ok(json!({"success": true, "context": ctx, "data": data}));
        }
        if let Some(ctx) = name.strip_prefix(tools::WRITE) {
            let Some(Value::Object(data)) = args.get("data") else {
                return Err("`data` must be an object of fields to write".into());
            };
            if let Some(context) = self.machine.node(ctx) {
                tools::check_context_write(context, data).map_err(|e| e.to_string())?;
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
            return Ok(
                json!({"success": true, "action": "context_write", "context": ctx,
                "written": written, "values": data}),
            );
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
            let edge = self
                .machine
                .outgoing(node)
                .into_iter()
                .find(|e| e.target == target && e.map_source().is_some())
                .cloned()
                .ok_or_else(|| format!("No @map edge from {node} to {target}"))?;
            let source = args
                .get("source")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| edge.map_source())
                .unwrap_or_default();
            let ids = self.map_spawn(path, &edge, &source)?;
            let group = edge.map_group().unwrap_or_else(|| source.replace('.', "_"));
            return Ok(
                json!({"success": true, "action": "map_spawn", "target": target,
                "groupId": group, "count": ids.len(), "pathIds": ids}),
            );
        }
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
                None => Err(format!("Unknown tool: {name}")),
            },
        }
    }

    pub(super) fn get_definition(&self, args: &Value) -> Value {
        let format = args.get("format").and_then(Value::as_str).unwrap_or("both");
        let dsl = || crate::render::dsl::to_dsl(&self.state.machine_snapshot);
        match format {
            "json" => json!({"json": self.state.machine_snapshot}),
            "dsl" => json!({"dsl": dsl()}),
            _ => json!({"json": self.state.machine_snapshot, "dsl": dsl()}),
        }
    }

    pub(super) fn update_definition(&mut self, args: &Value) -> Result<Value, String> {
        let machine = args.get("machine").cloned().unwrap_or(Value::Null);
        let ok = machine.get("title").is_some_and(Value::is_string)
            && machine.get("nodes").is_some_and(Value::is_array)
            && machine.get("edges").is_some_and(Value::is_array);
        if !ok {
            return Err("Invalid machine structure. The machine needs `title` (a string), `nodes` and `edges` (arrays)".into());
        }
        let candidate = Machine::from_json(&machine);
        for p in &self.state.paths {
            if matches!(p.status, PathStatus::Active | PathStatus::Waiting)
                && candidate.node(&p.current_node).is_none()
            {
                return Err(format!(
                    "The new machine has no node {} where path {} stands",
                    p.current_node, p.id
                ));
            }
        }
        self.state.machine_snapshot = machine;
        self.machine = candidate;
        self.machine_changed = true;
        Ok(
            json!({"success": true, "message": "Machine definition updated",
            "reason": args.get("reason"), "dsl": crate::render::dsl::to_dsl(&self.state.machine_snapshot)}),
        )
    }

    pub(super) fn register(&mut self, tool: DynamicTool) -> Result<(), String> {
        if !tools::valid_name(&tool.name) {
            return Err(format!(
                "Invalid tool name \"{}\": use letters, digits, _ and - (at most 64)",
                tool.name
            ));
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
            return Err(format!("Tool name \"{}\" is reserved", tool.name));
        }
        if !["code_generation", "agent_backed", "composition"].contains(&tool.strategy.as_str()) {
            return Err(format!(
                "Unknown implementation strategy \"{}\"",
                tool.strategy
            ));
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
        self.machine = Machine::from_json(&self.state.machine_snapshot);
        self.machine_changed = true;
        Ok(())
    }

    pub(super) fn construct_tool(&mut self, args: &Value) -> Result<Value, String> {
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
            "tool": summary, "dsl": crate::render::dsl::to_dsl(&self.state.machine_snapshot)}),
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

    pub(super) fn build_tool_from_node(&mut self, args: &Value) -> Result<Value, String> {
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
            .ok_or_else(|| format!("No tool node named \"{name}\""))?;
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

    pub(super) fn run_dynamic(&self, tool: &DynamicTool, args: &Value) -> Result<Value, String> {
        match tool.strategy.as_str() {
            "code_generation" => match js::run(&tool.implementation, args, &self.options.js_limits)
            {
                Ok(Some(result)) => Ok(json!({"success": true, "result": result})),
                Ok(None) => Ok(json!({"success": true, "result": null,
                    "message": "Code executed but returned no value"})),
                Err(e) => Err(format!("Tool {} failed: {e}", tool.name)),
            },
            "agent_backed" => Ok(json!({"success": true, "tool": tool.name,
                "message": "This tool is carried out by you, the model: follow its instructions with the input given",
                "instructions": tool.implementation, "input": args})),
            other => Err(format!(
                "Tools with the {other} strategy cannot be run yet; build it with code_generation"
            )),
        }
    }
}
