/* The envs of a synchronous actor-learner (algo vtrace and algo r2d2 in rl.mode sync):
 * E instances of one env, each with its running return and length and the counters
 * that name its next episode's seed and its next action's draw; their save into a
 * checkpoint and the checked load, so a resumed sync run is the same bits. */
#ifndef NEVO_ACTOR_ENVS_H
#define NEVO_ACTOR_ENVS_H

#include <stdint.h>

#include "nevo/env.h"
#include "nevo/io.h"
#include "nevo/status.h"

typedef struct NevoActorEnvs {
    const NevoEnv *env;
    uint64_t seed;     /* the run's: names the episodes' seeds */
    int E, D;
    size_t isz;
    uint8_t *insts;    /* (E) instances */
    double *ret;       /* (E) the running episode's return */
    int *len;          /* (E) and length */
    uint32_t *ep;      /* (E) episodes begun: names the next one's seed */
    uint64_t *steps;   /* (E) actions taken: names the next action's draw */
} NevoActorEnvs;

/* E instances, each reset into its first episode: obs (E, D) its first observations. */
void nevo_actor_envs_init(NevoActorEnvs *s, const NevoEnv *env, int E, uint64_t seed, float *obs);
void nevo_actor_envs_free(NevoActorEnvs *s);
void *nevo_actor_env(const NevoActorEnvs *s, int e);
/* Env e begins its next episode (seed (run seed, NEVO_RNG_ACTOR_ENV, ep[e], e)): its
 * first observation into obs (D). */
void nevo_actor_envs_start(NevoActorEnvs *s, int e, float *obs);
/* Every env (instance, observation obs + e D, counters); the load checks each value and
 * sets the env through set_state (prefixing messages with what). */
void nevo_actor_envs_save(const NevoActorEnvs *s, const float *obs, NevoBuf *b);
NevoStatus nevo_actor_envs_load(NevoActorEnvs *s, NevoReader *r, float *obs, const char *what, NevoError *err);

#endif
