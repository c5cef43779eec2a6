// Umbrella header for gluon's synchronisation primitives.
#pragma once
#include "gluon/sync/channel.h"
#include "gluon/sync/condition_variable.h"
#include "gluon/sync/mutex.h"
#include "gluon/sync/semaphore.h"
#include "gluon/sync/shared_mutex.h"
