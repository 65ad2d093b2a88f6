/* nevo: the umbrella header. */
#ifndef NEVO_H
#define NEVO_H

#include "nevo/algo.h"
#include "nevo/backend.h"
#include "nevo/checkpoint.h"
#include "nevo/config.h"
#include "nevo/dataset.h"
#include "nevo/env.h"
#include "nevo/eval.h"
#include "nevo/grad.h"
#include "nevo/io.h"
#include "nevo/lstm.h"
#include "nevo/noise.h"
#include "nevo/optim.h"
#include "nevo/novelty.h"
#include "nevo/params.h"
#include "nevo/policy.h"
#include "nevo/policy_file.h"
#include "nevo/rl.h"
#include "nevo/rng.h"
#include "nevo/status.h"
#include "nevo/supervised.h"
#include "nevo/tasks.h"
#include "nevo/threads.h"
#include "nevo/train.h"
#include "nevo/vec.h"
#include "nevo/version.h"

#endif
