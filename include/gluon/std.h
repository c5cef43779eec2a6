// Umbrella for the std drop-ins (see gluon/std_compat/std.h).
#pragma once
#include "gluon/std_compat/std.h"
