/* What env implementations share and the registry needs: the class symbols. An env
 * file defines one `const NevoEnvClass nevo_env_<name>` and adds it to the registry in env.c. */
#ifndef NEVO_ENV_INTERNAL_H
#define NEVO_ENV_INTERNAL_H

#include "nevo/env.h"
#include "nevo/rng.h"

extern const NevoEnvClass nevo_env_cartpole;
extern const NevoEnvClass nevo_env_acrobot;
extern const NevoEnvClass nevo_env_mountain_car;
extern const NevoEnvClass nevo_env_mountain_car_continuous;
extern const NevoEnvClass nevo_env_pendulum;
extern const NevoEnvClass nevo_env_minatar_asterix;
extern const NevoEnvClass nevo_env_minatar_breakout;
extern const NevoEnvClass nevo_env_minatar_freeway;
extern const NevoEnvClass nevo_env_minatar_seaquest;
extern const NevoEnvClass nevo_env_minatar_space_invaders;
extern const NevoEnvClass nevo_env_maze_hard;
extern const NevoEnvClass nevo_env_memory_tmaze;
extern const NevoEnvClass nevo_env_memory_recall;

#endif
