// Forwards to the configuration's folder while the DSv4 sources move; include
// dsv4/config/config.hpp.
#include "dsv4/config/config.hpp"  // IWYU pragma: export
