// numerics.hpp is header-only; this unit compiles it once with the project's warnings so a
// mistake in it shows up even where no reference includes it yet.
#include "reference/numerics.hpp"
