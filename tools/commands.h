#pragma once
// Subcommands of the `tandem` command line. Each takes the arguments after its name and returns
// the process exit code (0 ok, 1 failure, 2 usage error).

#include <string>
#include <vector>

namespace tandem::tools {

int RunVersion(const std::vector<std::string>& args);
int RunDemo(const std::vector<std::string>& args);
int RunQuantize(const std::vector<std::string>& args);
int RunMakeModel(const std::vector<std::string>& args);
int RunGenerate(const std::vector<std::string>& args);
int RunLocal(const std::vector<std::string>& args);
int RunBench(const std::vector<std::string>& args);
int RunEval(const std::vector<std::string>& args);

}  // namespace tandem::tools
