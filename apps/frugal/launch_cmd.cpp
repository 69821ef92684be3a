#include "commands.h"
#include "frugal/distributed/launcher.h"

namespace frugal::cli {

void add_launch(CLI::App& app, Action& run, const std::vector<std::string>& after_dashes) {
  auto o = std::make_shared<dist::LaunchOptions>();
  auto* cmd = app.add_subcommand(
      "launch",
      "Start the ranks of a multi-process job on this node (torchrun's environment contract): "
      "frugal launch --nproc-per-node 2 -- train cfg.yaml");
  cmd->add_option("--nproc-per-node", o->nproc_per_node, "Ranks on this node")
      ->check(at_least(1));
  cmd->add_option("--nnodes", o->nnodes, "Nodes in the job")->check(at_least(1));
  cmd->add_option("--node-rank", o->node_rank, "This node's index")->check(at_least(0));
  cmd->add_option("--master-addr", o->master_addr, "Address of rank 0's node");
  cmd->add_option("--master-port", o->master_port,
                  "Rendezvous port (0: a free one, single node only)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--max-restarts", o->max_restarts,
                  "Restart all ranks up to K times after a failure (train resumes)")
      ->check(at_least(0));
  cmd->add_option("--grace", o->grace_s, "Seconds between SIGTERM and SIGKILL when stopping ranks")
      ->check(at_least(0));
  // Everything from the first argument that is not a launch option on (or after "--") is
  // the rank's command: a frugal subcommand and its arguments, or a program path and its.
  cmd->prefix_command();
  cmd->footer("  frugal launch [OPTIONS] [--] train CONFIG.yaml [--set ...]\n"
              "  frugal launch [OPTIONS] [--] PROGRAM [ARGS...]   (a path, or a name on PATH)");
  cmd->callback([&run, &app, o, cmd, &after_dashes] {
    o->command = cmd->remaining();
    o->command.insert(o->command.end(), after_dashes.begin(), after_dashes.end());
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      o->frugal_commands.push_back(sub->get_name());
    }
    run = [o] { return dist::launch(*o); };
  });
}

}  // namespace frugal::cli
