// backplane_registry_check FILE...: parses registry files the way the core does and
// prints the first error as file:line:column: message. Run by the build.
#include <backplane/registry.h>

#include <fstream>
#include <iostream>
#include <sstream>

int main(int argc, char** argv) {
  backplane::Registry all;
  try {
    for (int i = 1; i < argc; ++i) {
      std::ifstream in(argv[i]);
      if (!in) {
        std::cerr << argv[i] << ": cannot read\n";
        return 1;
      }
      std::stringstream text;
      text << in.rdbuf();
      all.merge(backplane::parse_registry(text.str(), argv[i]));
    }
    all.check_classes();
  } catch (const backplane::RegistryError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  std::cout << "registry: " << all.ops().size() << " ops, " << all.classes().size() << " classes OK\n";
  return 0;
}
