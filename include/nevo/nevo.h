/* nevo: the umbrella header. */
#ifndef NEVO_H
#define NEVO_H

#include "nevo/algo.h"
#include "nevo/backend.h"
#include "nevo/checkpoint.h"
#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/eval.h"
#include "nevo/io.h"
#include "nevo/noise.h"
#include "nevo/novelty.h"
#include "nevo/params.h"
#include "nevo/policy.h"
#include "nevo/policy_file.h"
#include "nevo/rng.h"
#include "nevo/status.h"
#include "nevo/tasks.h"
#include "nevo/threads.h"
#include "nevo/train.h"
#include "nevo/version.h"

#endif
