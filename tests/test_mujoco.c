/* Tests for the MuJoCo envs (src/envs/mujoco_common.c, mujoco_<robot>.c) and their
 * models (models/mujoco/).
 *
 * References:
 * - the robots: when ../shared/reference/mujoco exists (Gymnasium's model files), each
 *   of our models must compile to the same robot (sizes, masses, inertias, joints,
 *   geoms, contact parameters, actuators, solver options) and simulate the same
 *   trajectory under the same controls; skipped, saying so, elsewhere;
 * - the rules (Gymnasium v5 and gym's 2017 Humanoid-v1 for the trap): every reward,
 *   termination flag and observation of recorded random-action episodes is recomputed
 *   here from the instance's mjData, by code written apart from the env's own;
 * - health edges at exactly the documented thresholds, set through set_state;
 * - determinism (seeds, get/set_state continuation, moved instances, the evaluator at
 *   any thread and slot count) and resource ownership (no mjData leaked);
 * - random-policy returns within bands derived from the reward terms;
 * - failures: a missing, broken or wrong model file, bad options, a diverging state;
 * - pictures (mujoco_render.c, EGL + MuJoCo's renderer): a hopper frame shows the body
 *   against floor and sky, the body's pixels move when its joints do, drawing leaves
 *   the simulation untouched and repeats exactly, also after another model was drawn. */
#include <malloc.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envs/mujoco_common.h"
#include "harness.h"
#include "nevo/eval.h"
#include "nevo/noise.h"
#include "nevo/rng.h"

#define REFERENCE_DIR "../shared/reference/mujoco"

typedef struct EnvCase {
    const char *name;
    const char *model;     /* ours, in models/mujoco */
    const char *reference; /* Gymnasium's, in REFERENCE_DIR */
} EnvCase;

static const EnvCase cases[] = {
    {"mujoco/hopper", "hopper.xml", "hopper.xml"},
    {"mujoco/halfcheetah", "halfcheetah.xml", "half_cheetah.xml"},
    {"mujoco/walker2d", "walker2d.xml", "walker2d_v5.xml"},
    {"mujoco/ant", "ant.xml", "ant.xml"},
    {"mujoco/humanoid", "humanoid.xml", "humanoid.xml"},
    {"mujoco/swimmer", "swimmer.xml", "swimmer.xml"},
    {"mujoco/invertedpendulum", "invertedpendulum.xml", "inverted_pendulum.xml"},
    {"mujoco/humanoid_trap", "humanoid_trap.xml", "humanoid.xml"},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static NevoEnv *open_env_opts(const char *name, const NevoEnvOption *opts, int n) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new(name, opts, n, &env, &err) == NEVO_OK, "nevo_env_new(%s): %s", name,
              err.msg);
    return env;
}

static NevoEnv *open_env(const char *name) { return open_env_opts(name, NULL, 0); }

static void *new_instance(const NevoEnv *env) {
    void *inst = malloc(nevo_env_instance_size(env));
    CHECK(inst);
    nevo_env_instance_init(env, inst);
    return inst;
}

static void free_instance(const NevoEnv *env, void *inst) {
    nevo_env_instance_free(env, inst);
    free(inst);
}

static bool is(const char *name, const char *short_name) {
    return strcmp(name + strlen("mujoco/"), short_name) == 0;
}

/* Uniform action in the env's box. */
static void random_action(const NevoEnvSpec *s, NevoRng *rng, float *a) {
    for (int j = 0; j < s->action_dim; j++)
        a[j] = s->action_low[j] + (float)nevo_rng_uniform(rng) * (s->action_high[j] - s->action_low[j]);
}

static bool close_enough(double got, double want, double rel) {
    return fabs(got - want) <= rel * (1 + fabs(want));
}

/* --- the robots against Gymnasium's models ------------------------------------------ */

static bool have_reference(void) {
    struct stat st;
    return stat(REFERENCE_DIR, &st) == 0 && S_ISDIR(st.st_mode);
}

static mjModel *load(const char *path) {
    char msg[1024] = "";
    mjModel *m = mj_loadXML(path, NULL, msg, sizeof msg);
    CHECK_MSG(m, "cannot load %s: %s", path, msg);
    return m;
}

/* Compares n values (relative 1e-9: the files write the same decimals, compiled in the
 * same order; only derived values like inertias may differ in the last bits). */
static void same_reals(const char *model, const char *what, const mjtNum *a, const mjtNum *b, int n) {
    for (int i = 0; i < n; i++)
        CHECK_MSG(close_enough(a[i], b[i], 1e-9), "%s: %s[%d] is %.17g, reference %.17g", model,
                  what, i, a[i], b[i]);
}

static void same_ints(const char *model, const char *what, const int *a, const int *b, int n) {
    for (int i = 0; i < n; i++)
        CHECK_MSG(a[i] == b[i], "%s: %s[%d] is %d, reference %d", model, what, i, a[i], b[i]);
}

static void same_bytes(const char *model, const char *what, const mjtByte *a, const mjtByte *b, int n) {
    for (int i = 0; i < n; i++)
        CHECK_MSG(a[i] == b[i], "%s: %s[%d] is %d, reference %d", model, what, i, a[i], b[i]);
}

/* Our model a against reference b. Geom g of a is geom g - skip of b for g >= first
 * (the trap's walls are extra world geoms after the floor). */
static void same_robot(const char *name, const mjModel *a, const mjModel *b, int first, int skip) {
    CHECK_EQ_INT(a->nq, b->nq);
    CHECK_EQ_INT(a->nv, b->nv);
    CHECK_EQ_INT(a->nu, b->nu);
    CHECK_EQ_INT(a->na, b->na);
    CHECK_EQ_INT(a->nbody, b->nbody);
    CHECK_EQ_INT(a->njnt, b->njnt);
    CHECK_EQ_INT(a->ngeom, b->ngeom + skip);
    CHECK_EQ_INT(a->ntendon, b->ntendon);
    CHECK_EQ_INT(a->neq, b->neq);
    /* simulation options */
    same_reals(name, "timestep", &a->opt.timestep, &b->opt.timestep, 1);
    same_reals(name, "gravity", a->opt.gravity, b->opt.gravity, 3);
    same_reals(name, "density", &a->opt.density, &b->opt.density, 1);
    same_reals(name, "viscosity", &a->opt.viscosity, &b->opt.viscosity, 1);
    same_reals(name, "impratio", &a->opt.impratio, &b->opt.impratio, 1);
    same_reals(name, "tolerance", &a->opt.tolerance, &b->opt.tolerance, 1);
    same_ints(name, "integrator", &a->opt.integrator, &b->opt.integrator, 1);
    same_ints(name, "solver", &a->opt.solver, &b->opt.solver, 1);
    same_ints(name, "iterations", &a->opt.iterations, &b->opt.iterations, 1);
    same_ints(name, "cone", &a->opt.cone, &b->opt.cone, 1);
    same_ints(name, "disableflags", &a->opt.disableflags, &b->opt.disableflags, 1);
    same_ints(name, "enableflags", &a->opt.enableflags, &b->opt.enableflags, 1);
    /* bodies */
    same_ints(name, "body_parentid", a->body_parentid, b->body_parentid, a->nbody);
    same_reals(name, "body_mass", a->body_mass, b->body_mass, a->nbody);
    same_reals(name, "body_inertia", a->body_inertia, b->body_inertia, 3 * a->nbody);
    same_reals(name, "body_pos", a->body_pos, b->body_pos, 3 * a->nbody);
    same_reals(name, "body_quat", a->body_quat, b->body_quat, 4 * a->nbody);
    same_reals(name, "body_ipos", a->body_ipos, b->body_ipos, 3 * a->nbody);
    /* joints and dofs */
    same_ints(name, "jnt_type", a->jnt_type, b->jnt_type, a->njnt);
    same_ints(name, "jnt_bodyid", a->jnt_bodyid, b->jnt_bodyid, a->njnt);
    same_bytes(name, "jnt_limited", a->jnt_limited, b->jnt_limited, a->njnt);
    same_reals(name, "jnt_pos", a->jnt_pos, b->jnt_pos, 3 * a->njnt);
    same_reals(name, "jnt_axis", a->jnt_axis, b->jnt_axis, 3 * a->njnt);
    same_reals(name, "jnt_stiffness", a->jnt_stiffness, b->jnt_stiffness, a->njnt);
    same_reals(name, "jnt_margin", a->jnt_margin, b->jnt_margin, a->njnt);
    same_reals(name, "jnt_solref", a->jnt_solref, b->jnt_solref, mjNREF * a->njnt);
    same_reals(name, "jnt_solimp", a->jnt_solimp, b->jnt_solimp, mjNIMP * a->njnt);
    same_reals(name, "qpos0", a->qpos0, b->qpos0, a->nq);
    same_reals(name, "qpos_spring", a->qpos_spring, b->qpos_spring, a->nq);
    same_reals(name, "dof_armature", a->dof_armature, b->dof_armature, a->nv);
    same_reals(name, "dof_damping", a->dof_damping, b->dof_damping, a->nv);
    same_reals(name, "dof_frictionloss", a->dof_frictionloss, b->dof_frictionloss, a->nv);
    /* joint ranges: the trap's left_hip_y is the one difference (2017 gym, -120 degrees) */
    int lhy = mj_name2id(a, mjOBJ_JOINT, "left_hip_y");
    bool trap = skip > 0;
    for (int j = 0; j < a->njnt; j++) {
        if (trap && j == lhy) {
            CHECK_NEAR(a->jnt_range[2 * j], -120 * M_PI / 180, 1e-12);
            CHECK_NEAR(a->jnt_range[2 * j + 1], b->jnt_range[2 * j + 1], 1e-12);
            CHECK_NEAR(b->jnt_range[2 * j], -110 * M_PI / 180, 1e-12);
            continue;
        }
        same_reals(name, "jnt_range", a->jnt_range + 2 * j, b->jnt_range + 2 * j, 2);
    }
    /* geoms */
    for (int g = 0; g < a->ngeom; g++) {
        if (g >= first - skip && g < first) continue; /* an extra geom of ours */
        int h = g >= first ? g - skip : g;
        same_ints(name, "geom_type", a->geom_type + g, b->geom_type + h, 1);
        same_ints(name, "geom_bodyid", a->geom_bodyid + g, b->geom_bodyid + h, 1);
        same_ints(name, "geom_contype", a->geom_contype + g, b->geom_contype + h, 1);
        same_ints(name, "geom_conaffinity", a->geom_conaffinity + g, b->geom_conaffinity + h, 1);
        same_ints(name, "geom_condim", a->geom_condim + g, b->geom_condim + h, 1);
        same_reals(name, "geom_size", a->geom_size + 3 * g, b->geom_size + 3 * h, 3);
        same_reals(name, "geom_pos", a->geom_pos + 3 * g, b->geom_pos + 3 * h, 3);
        same_reals(name, "geom_quat", a->geom_quat + 4 * g, b->geom_quat + 4 * h, 4);
        same_reals(name, "geom_friction", a->geom_friction + 3 * g, b->geom_friction + 3 * h, 3);
        same_reals(name, "geom_margin", a->geom_margin + g, b->geom_margin + h, 1);
        same_reals(name, "geom_gap", a->geom_gap + g, b->geom_gap + h, 1);
        same_reals(name, "geom_solref", a->geom_solref + mjNREF * g, b->geom_solref + mjNREF * h, mjNREF);
        same_reals(name, "geom_solimp", a->geom_solimp + mjNIMP * g, b->geom_solimp + mjNIMP * h, mjNIMP);
        same_reals(name, "geom_solmix", a->geom_solmix + g, b->geom_solmix + h, 1);
    }
    /* actuators */
    same_ints(name, "actuator_trnid", a->actuator_trnid, b->actuator_trnid, 2 * a->nu);
    same_ints(name, "actuator_dyntype", a->actuator_dyntype, b->actuator_dyntype, a->nu);
    same_ints(name, "actuator_gaintype", a->actuator_gaintype, b->actuator_gaintype, a->nu);
    same_ints(name, "actuator_biastype", a->actuator_biastype, b->actuator_biastype, a->nu);
    same_reals(name, "actuator_gear", a->actuator_gear, b->actuator_gear, 6 * a->nu);
    same_bytes(name, "actuator_ctrllimited", a->actuator_ctrllimited, b->actuator_ctrllimited, a->nu);
    same_reals(name, "actuator_ctrlrange", a->actuator_ctrlrange, b->actuator_ctrlrange, 2 * a->nu);
    same_bytes(name, "actuator_forcelimited", a->actuator_forcelimited, b->actuator_forcelimited, a->nu);
    same_reals(name, "actuator_gainprm", a->actuator_gainprm, b->actuator_gainprm, mjNGAIN * a->nu);
    same_reals(name, "actuator_biasprm", a->actuator_biasprm, b->actuator_biasprm, mjNBIAS * a->nu);
}

/* The two models under the same random controls for 200 steps from rest stay within
 * 1e-6 (most are bit-identical; decimals like 0.19999999999999996 in the reference give
 * last-bit differences that contacts amplify slowly). */
static void same_trajectory(const char *name, const mjModel *a, const mjModel *b) {
    mjData *da = mj_makeData(a), *db = mj_makeData(b);
    NevoRng rng;
    nevo_rng_init(&rng, 7, NEVO_RNG_USER, 0, 0, 0);
    double worst = 0;
    for (int t = 0; t < 200; t++) {
        for (int j = 0; j < a->nu; j++) {
            double lo = a->actuator_ctrlrange[2 * j], hi = a->actuator_ctrlrange[2 * j + 1];
            da->ctrl[j] = db->ctrl[j] = lo + (hi - lo) * nevo_rng_uniform(&rng);
        }
        mj_step(a, da);
        mj_step(b, db);
        for (int i = 0; i < a->nq; i++) worst = fmax(worst, fabs(da->qpos[i] - db->qpos[i]));
        for (int i = 0; i < a->nv; i++) worst = fmax(worst, fabs(da->qvel[i] - db->qvel[i]) * a->opt.timestep);
    }
    CHECK_MSG(worst < 1e-6, "%s: trajectory departs from the reference model's by %g", name, worst);
    mj_deleteData(da);
    mj_deleteData(db);
}

TEST(mujoco_models_match_reference) {
    if (!have_reference()) {
        printf("    skipped: %s not found (the reference models live in ../shared)\n", REFERENCE_DIR);
        return;
    }
    for (int c = 0; c < N_CASES; c++) {
        char ours[512], ref[512];
        snprintf(ours, sizeof ours, "models/mujoco/%s", cases[c].model);
        snprintf(ref, sizeof ref, "%s/%s", REFERENCE_DIR, cases[c].reference);
        mjModel *a = load(ours), *b = load(ref);
        bool trap = is(cases[c].name, "humanoid_trap");
        /* the trap adds its three walls right after the floor (geom 0) */
        same_robot(ours, a, b, trap ? 4 : 0, trap ? 3 : 0);
        if (!trap) same_trajectory(ours, a, b);
        mj_deleteModel(a);
        mj_deleteModel(b);
    }
}

/* The trap's walls, from spec ENVS.md section 4: centre / half-sizes, colliding like the
 * default geom (contype = conaffinity = 1, condim 1, margin 0.001). */
TEST(mujoco_trap_walls) {
    NevoEnv *env = open_env("mujoco/humanoid_trap");
    const mjModel *m = nevo_mj_model(env);
    static const struct {
        const char *name;
        double pos[3], size[3];
    } walls[] = {
        {"frontwall", {5.5, 0, 0}, {0.1, 1.5, 2}},
        {"topwall", {4, 1.5, 0}, {1.5, 0.1, 2}},
        {"bottomwall", {4, -1.5, 0}, {1.5, 0.1, 2}},
    };
    for (int w = 0; w < 3; w++) {
        int g = mj_name2id(m, mjOBJ_GEOM, walls[w].name);
        CHECK_MSG(g >= 0, "no geom %s", walls[w].name);
        CHECK_EQ_INT(m->geom_type[g], mjGEOM_BOX);
        CHECK_EQ_INT(m->geom_bodyid[g], 0);
        CHECK_EQ_INT(m->geom_contype[g], 1);
        CHECK_EQ_INT(m->geom_conaffinity[g], 1);
        CHECK_EQ_INT(m->geom_condim[g], 1);
        CHECK_NEAR(m->geom_margin[g], 0.001, 1e-15);
        for (int k = 0; k < 3; k++) {
            CHECK_NEAR(m->geom_pos[3 * g + k], walls[w].pos[k], 1e-15);
            CHECK_NEAR(m->geom_size[3 * g + k], walls[w].size[k], 1e-15);
        }
    }
    /* the robot starts facing the pocket, torso at (0, 0, 1.4) */
    CHECK_NEAR(m->qpos0[0], 0, 0);
    CHECK_NEAR(m->qpos0[2], 1.4, 1e-15);
    /* and is stopped by the front wall: launched at 4 m/s from x = 4.5, its centre of
     * mass never passes the wall's face at x = 5.4 */
    void *inst = new_instance(env);
    float *obs = malloc(sizeof(float) * 376);
    nevo_env_reset(env, inst, 1, obs);
    double st[72];
    nevo_env_get_state(env, inst, st);
    st[1 + 0] = 4.5;     /* qpos x */
    st[1 + 24 + 0] = 4;  /* qvel x */
    NevoError err = {0};
    CHECK(nevo_env_set_state(env, inst, st, 0, obs, &err) == NEVO_OK);
    float zero[17] = {0}, bc[2];
    double max_x = 0;
    for (int t = 0; t < 60; t++) {
        NevoStepResult r;
        nevo_env_step(env, inst, zero, obs, &r);
        nevo_env_bc(env, inst, obs, bc);
        max_x = fmax(max_x, bc[0]);
    }
    CHECK_MSG(max_x > 5.0 && max_x < 5.4, "centre of mass reached x = %g", max_x);
    free(obs);
    free_instance(env, inst);
    nevo_env_free(env);
}

/* The trap's public scene (what `nevo plot` draws) is the loaded model's walls seen from
 * above: each wall geom's footprint, centre +- half-size in x and y, is one scene wall's
 * line widened by its width; the start is the torso's resting (x, y), where the centre
 * of mass also starts; the region holds both. */
TEST(mujoco_trap_scene_matches_the_walls) {
    const NevoEnvScene *sc = nevo_env_scene("mujoco/humanoid_trap");
    CHECK(sc && sc == nevo_env_find("mujoco/humanoid_trap")->scene);
    CHECK(!nevo_env_scene("mujoco/humanoid") && !nevo_env_scene("mujoco/nope"));
    CHECK(!sc->enclosed && sc->has_start && !sc->has_goal && sc->x_label && sc->y_label);
    NevoEnvOption quiet = {"reset_noise_scale", 0};
    NevoEnv *env = open_env_opts("mujoco/humanoid_trap", &quiet, 1);
    const mjModel *m = nevo_mj_model(env);
    int n_box_walls = 0;
    bool matched[8] = {false};
    CHECK(sc->n_walls > 0 && sc->n_walls <= 8);
    for (int g = 0; g < m->ngeom; g++) {
        if (m->geom_bodyid[g] != 0 || m->geom_type[g] != mjGEOM_BOX) continue;
        n_box_walls++;
        const mjtNum *pos = m->geom_pos + 3 * g, *size = m->geom_size + 3 * g;
        int found = -1;
        for (int w = 0; w < sc->n_walls; w++) {
            const NevoSceneWall *wl = &sc->walls[w];
            /* an axis-aligned footprint: the line's box, grown by half the width across it */
            double hx = wl->y1 == wl->y2 ? 0 : wl->width / 2, hy = wl->x1 == wl->x2 ? 0 : wl->width / 2;
            CHECK_MSG(wl->x1 == wl->x2 || wl->y1 == wl->y2, "scene wall %d is not axis-aligned", w);
            double x0 = fmin(wl->x1, wl->x2) - hx, x1 = fmax(wl->x1, wl->x2) + hx;
            double y0 = fmin(wl->y1, wl->y2) - hy, y1 = fmax(wl->y1, wl->y2) + hy;
            if (fabs(x0 - (pos[0] - size[0])) < 1e-12 && fabs(x1 - (pos[0] + size[0])) < 1e-12 &&
                fabs(y0 - (pos[1] - size[1])) < 1e-12 && fabs(y1 - (pos[1] + size[1])) < 1e-12)
                found = w;
        }
        CHECK_MSG(found >= 0 && !matched[found], "wall geom %s has no scene wall of its footprint",
                  mj_id2name(m, mjOBJ_GEOM, g));
        matched[found] = true;
        for (int k = 0; k < 2; k++)
            CHECK_MSG(pos[k] - size[k] >= sc->lo[k] && pos[k] + size[k] <= sc->hi[k],
                      "wall geom %s leaves the scene's region", mj_id2name(m, mjOBJ_GEOM, g));
    }
    CHECK_EQ_INT(n_box_walls, sc->n_walls);
    CHECK_NEAR(sc->start[0], m->qpos0[0], 0);
    CHECK_NEAR(sc->start[1], m->qpos0[1], 0);
    CHECK(sc->start[0] >= sc->lo[0] && sc->start[0] <= sc->hi[0]);
    CHECK(sc->start[1] >= sc->lo[1] && sc->start[1] <= sc->hi[1]);
    void *inst = new_instance(env);
    float *obs = malloc(sizeof(float) * 376), bc[2];
    nevo_env_reset(env, inst, 1, obs);
    nevo_env_bc(env, inst, obs, bc);
    CHECK_MSG(hypot(bc[0] - sc->start[0], bc[1] - sc->start[1]) < 0.1,
              "the centre of mass starts at (%g, %g), the scene's start is (%g, %g)", bc[0], bc[1],
              sc->start[0], sc->start[1]);
    free(obs);
    free_instance(env, inst);
    nevo_env_free(env);
}

/* --- registry and observation sizes -------------------------------------------------- */

/* Observation size from the model's own sizes, by the rule each env documents. */
static int expected_obs_dim(const char *name, const mjModel *m) {
    int nb = m->nbody;
    if (is(name, "hopper") || is(name, "halfcheetah") || is(name, "walker2d")) return m->nq - 1 + m->nv;
    if (is(name, "swimmer")) return m->nq - 2 + m->nv;
    if (is(name, "invertedpendulum")) return m->nq + m->nv;
    if (is(name, "ant")) return m->nq - 2 + m->nv + 6 * (nb - 1);
    if (is(name, "humanoid"))
        return m->nq - 2 + m->nv + 10 * (nb - 1) + 6 * (nb - 1) + (m->nv - 6) + 6 * (nb - 1);
    if (is(name, "humanoid_trap")) return m->nq - 2 + m->nv + 10 * nb + 6 * nb + m->nv + 6 * nb;
    return -1;
}

TEST(mujoco_registry_and_sizes) {
    static const int obs_dims[N_CASES] = {11, 17, 17, 105, 348, 8, 4, 376};
    static const int frame_skips[N_CASES] = {4, 5, 4, 5, 5, 4, 2, 5};
    for (int c = 0; c < N_CASES; c++) {
        const char *name = cases[c].name;
        CHECK_MSG(nevo_env_find(name), "%s is not registered", name);
        NevoEnv *env = open_env(name);
        const NevoEnvSpec *s = nevo_env_spec(env);
        const mjModel *m = nevo_mj_model(env);
        const MjParams *p = nevo_env_params(env);
        CHECK_EQ_INT(s->obs_dim, obs_dims[c]);
        CHECK_EQ_INT(s->obs_dim, expected_obs_dim(name, m));
        CHECK_EQ_INT(s->obs_rank, 1);
        CHECK_EQ_INT(s->obs_shape[0], s->obs_dim);
        CHECK_EQ_INT(s->action_kind, NEVO_SPACE_BOX);
        CHECK_EQ_INT(s->action_dim, m->nu);
        CHECK_EQ_INT(s->max_steps, 1000);
        CHECK_EQ_INT(s->state_dim, m->nq + 2 * m->nv + 2);
        CHECK_EQ_INT(p->frame_skip, frame_skips[c]);
        CHECK_NEAR(p->dt, m->opt.timestep * frame_skips[c], 1e-15);
        for (int j = 0; j < m->nu; j++) {
            CHECK_NEAR(s->action_low[j], m->actuator_ctrlrange[2 * j], 1e-7);
            CHECK_NEAR(s->action_high[j], m->actuator_ctrlrange[2 * j + 1], 1e-7);
        }
        CHECK_EQ_INT(nevo_env_instance_size(env) % 16, 0);
        /* the reset observation is finite and nothing is simulated before the first reset */
        void *inst = new_instance(env);
        CHECK(nevo_mj_data(env, inst) == NULL);
        float *obs = malloc(sizeof(float) * (size_t)s->obs_dim);
        nevo_env_reset(env, inst, 3, obs);
        CHECK(nevo_mj_data(env, inst) != NULL);
        for (int i = 0; i < s->obs_dim; i++) CHECK_MSG(isfinite(obs[i]), "%s obs[%d]", name, i);
        free(obs);
        free_instance(env, inst);
        nevo_env_free(env);
    }
    /* registry thresholds, as Gymnasium registers them */
    CHECK_NEAR(nevo_env_find("mujoco/hopper")->spec.reward_threshold, 3800, 0);
    CHECK_NEAR(nevo_env_find("mujoco/halfcheetah")->spec.reward_threshold, 4800, 0);
    CHECK_NEAR(nevo_env_find("mujoco/ant")->spec.reward_threshold, 6000, 0);
    CHECK_NEAR(nevo_env_find("mujoco/swimmer")->spec.reward_threshold, 360, 0);
    CHECK_NEAR(nevo_env_find("mujoco/invertedpendulum")->spec.reward_threshold, 950, 0);
    CHECK(!nevo_env_find("mujoco/walker2d")->spec.has_reward_threshold);
    CHECK(!nevo_env_find("mujoco/humanoid")->spec.has_reward_threshold);
}

/* --- rules recomputed from mjData ------------------------------------------------------ */

/* Whole-body centre of mass x (or y), written here independently. */
static double com(const mjModel *m, const mjData *d, int axis) {
    double num = 0, den = 0;
    for (int b = 0; b < m->nbody; b++) {
        num += m->body_mass[b] * d->xipos[3 * b + axis];
        den += m->body_mass[b];
    }
    return num / den;
}

static double forward_coordinate(const char *name, const mjModel *m, const mjData *d) {
    if (is(name, "ant")) return d->xpos[3]; /* body 1, the torso */
    if (is(name, "humanoid") || is(name, "humanoid_trap")) return com(m, d, 0);
    return d->qpos[0];
}

static double sq_sum(const mjtNum *x, int n, double clip) {
    double s = 0;
    for (int i = 0; i < n; i++) {
        double v = clip > 0 ? fmax(-clip, fmin(clip, x[i])) : x[i];
        s += v * v;
    }
    return s;
}

typedef struct Expected {
    double reward;
    bool terminated;
    double terms[4]; /* forward, healthy, ctrl, contact */
} Expected;

/* Gymnasium v5's rules (Humanoid-v1's for the trap) for one step, from the data after
 * it, the forward coordinate before it and the raw action. */
static Expected expected_step(const char *name, const mjModel *m, const mjData *d, double x_before,
                              const float *a, int frame_skip) {
    Expected e = {0};
    double dt = m->opt.timestep * frame_skip;
    double dx = forward_coordinate(name, m, d) - x_before;
    double asq = 0;
    for (int j = 0; j < m->nu; j++) asq += (double)a[j] * a[j];
    const double *q = d->qpos, *v = d->qvel;
    bool healthy = true;
    if (is(name, "hopper")) {
        for (int i = 2; i < m->nq; i++) healthy = healthy && fabs(q[i]) < 100;
        for (int i = 0; i < m->nv; i++) healthy = healthy && fabs(v[i]) < 100;
        healthy = healthy && q[1] > 0.7 && fabs(q[2]) < 0.2;
        e.terms[0] = dx / dt, e.terms[1] = healthy, e.terms[2] = -1e-3 * asq;
    } else if (is(name, "walker2d")) {
        healthy = q[1] > 0.8 && q[1] < 2 && fabs(q[2]) < 1;
        e.terms[0] = dx / dt, e.terms[1] = healthy, e.terms[2] = -1e-3 * asq;
    } else if (is(name, "halfcheetah")) {
        e.terms[0] = dx / dt, e.terms[2] = -0.1 * asq;
    } else if (is(name, "swimmer")) {
        e.terms[0] = dx / dt, e.terms[2] = -1e-4 * asq;
    } else if (is(name, "ant")) {
        healthy = q[2] >= 0.2 && q[2] <= 1;
        e.terms[0] = dx / dt, e.terms[1] = healthy, e.terms[2] = -0.5 * asq;
        e.terms[3] = -5e-4 * sq_sum(d->cfrc_ext, 6 * m->nbody, 1.0);
    } else if (is(name, "humanoid")) {
        healthy = q[2] > 1 && q[2] < 2;
        e.terms[0] = 1.25 * dx / dt, e.terms[1] = 5.0 * healthy, e.terms[2] = -0.1 * asq;
        e.terms[3] = -fmin(5e-7 * sq_sum(d->cfrc_ext, 6 * m->nbody, 0), 10);
    } else if (is(name, "humanoid_trap")) {
        healthy = !(q[2] < 1 || q[2] > 2);
        e.terms[0] = 0.25 * dx / m->opt.timestep, e.terms[1] = 5.0, e.terms[2] = -0.1 * asq;
        e.terms[3] = -fmin(0.5e-6 * sq_sum(d->cfrc_ext, 6 * m->nbody, 0), 10);
    } else if (is(name, "invertedpendulum")) {
        healthy = isfinite(q[0]) && isfinite(q[1]) && isfinite(v[0]) && isfinite(v[1]) && fabs(q[1]) <= 0.2;
        e.terms[1] = healthy;
    }
    e.terminated = !healthy && !is(name, "halfcheetah") && !is(name, "swimmer");
    e.reward = e.terms[0] + e.terms[1] + e.terms[2] + e.terms[3];
    return e;
}

/* The observation each env documents, assembled here from d. */
static int expected_obs(const char *name, const mjModel *m, const mjData *d, double *o) {
    int n = 0, nb = m->nbody;
#define PUT(src, count, lim)                                                                        \
    for (int i_ = 0; i_ < (count); i_++) {                                                          \
        double v_ = (src)[i_];                                                                       \
        o[n++] = (lim) > 0 ? fmax(-(lim), fmin((lim), v_)) : v_;                                     \
    }
    if (is(name, "hopper") || is(name, "walker2d")) {
        PUT(d->qpos + 1, m->nq - 1, 0);
        PUT(d->qvel, m->nv, 10);
    } else if (is(name, "halfcheetah")) {
        PUT(d->qpos + 1, m->nq - 1, 0);
        PUT(d->qvel, m->nv, 0);
    } else if (is(name, "swimmer")) {
        PUT(d->qpos + 2, m->nq - 2, 0);
        PUT(d->qvel, m->nv, 0);
    } else if (is(name, "invertedpendulum")) {
        PUT(d->qpos, m->nq, 0);
        PUT(d->qvel, m->nv, 0);
    } else if (is(name, "ant")) {
        PUT(d->qpos + 2, m->nq - 2, 0);
        PUT(d->qvel, m->nv, 0);
        PUT(d->cfrc_ext + 6, 6 * (nb - 1), 1);
    } else if (is(name, "humanoid")) {
        PUT(d->qpos + 2, m->nq - 2, 0);
        PUT(d->qvel, m->nv, 0);
        PUT(d->cinert + 10, 10 * (nb - 1), 0);
        PUT(d->cvel + 6, 6 * (nb - 1), 0);
        PUT(d->qfrc_actuator + 6, m->nv - 6, 0);
        PUT(d->cfrc_ext + 6, 6 * (nb - 1), 0);
    } else if (is(name, "humanoid_trap")) {
        PUT(d->qpos + 2, m->nq - 2, 0);
        PUT(d->qvel, m->nv, 0);
        PUT(d->cinert, 10 * nb, 0);
        PUT(d->cvel, 6 * nb, 0);
        PUT(d->qfrc_actuator, m->nv, 0);
        PUT(d->cfrc_ext, 6 * nb, 0);
    }
#undef PUT
    return n;
}

static void check_obs(const char *name, const mjModel *m, const mjData *d, const float *obs, int dim,
                      int t) {
    double *want = malloc(sizeof(double) * 512);
    CHECK_EQ_INT(expected_obs(name, m, d, want), dim);
    for (int i = 0; i < dim; i++)
        CHECK_MSG((double)obs[i] == (double)(float)want[i], "%s step %d obs[%d] = %.9g, want %.9g",
                  name, t, i, obs[i], want[i]);
    free(want);
}

/* Two random-action episodes per env (up to 300 steps): every reward, flag and
 * observation equals the rules recomputed from mjData. Also checks the contact forces
 * are really computed (mj_rnePostConstraint) where the rules use them. */
TEST(mujoco_rewards_observations_recomputed) {
    static const int frame_skips[N_CASES] = {4, 5, 4, 5, 5, 4, 2, 5};
    for (int c = 0; c < N_CASES; c++) {
        const char *name = cases[c].name;
        NevoEnv *env = open_env(name);
        const NevoEnvSpec *s = nevo_env_spec(env);
        const mjModel *m = nevo_mj_model(env);
        void *inst = new_instance(env);
        float *obs = malloc(sizeof(float) * (size_t)s->obs_dim);
        float a[NEVO_ENV_MAX_ACT_DIM];
        double max_contact = 0, max_obs_force = 0;
        int steps = 0, healthy_steps = 0;
        for (int ep = 0; ep < 2; ep++) {
            NevoRng rng;
            nevo_rng_init(&rng, 100 + (uint64_t)ep, NEVO_RNG_POLICY, 0, 0, 0);
            nevo_env_reset(env, inst, 50 + (uint64_t)ep, obs);
            const mjData *d = nevo_mj_data(env, inst);
            check_obs(name, m, d, obs, s->obs_dim, 0);
            for (int t = 1; t <= 300; t++) {
                random_action(s, &rng, a);
                /* push some actions past the box: costs must see the raw action */
                if (t % 7 == 0) a[0] = 2.5f * s->action_high[0];
                double x_before = forward_coordinate(name, m, d);
                NevoStepResult r;
                nevo_env_step(env, inst, a, obs, &r);
                Expected e = expected_step(name, m, d, x_before, a, frame_skips[c]);
                CHECK_MSG(close_enough(r.reward, e.reward, 1e-6),
                          "%s ep %d step %d: reward %.9g, rules give %.9g (forward %.6g, healthy %g, "
                          "ctrl %.6g, contact %.6g)",
                          name, ep, t, r.reward, e.reward, e.terms[0], e.terms[1], e.terms[2], e.terms[3]);
                CHECK_MSG(r.terminated == e.terminated, "%s step %d: terminated %d, rules say %d", name,
                          t, r.terminated, e.terminated);
                CHECK(!r.truncated);
                check_obs(name, m, d, obs, s->obs_dim, t);
                max_contact = fmax(max_contact, fabs(e.terms[3]));
                steps++;
                healthy_steps += e.terms[1] != 0;
                if (is(name, "ant") || is(name, "humanoid"))
                    for (int i = 0; i < s->obs_dim; i++) max_obs_force = fmax(max_obs_force, fabs(obs[i]));
                if (r.terminated) break;
            }
        }
        if (is(name, "ant") || is(name, "humanoid") || is(name, "humanoid_trap"))
            CHECK_MSG(max_contact > 0, "%s: contact cost always 0 (contact forces not computed?)", name);
        CHECK_MSG(steps >= 4, "%s: only %d steps", name, steps);
        printf("    %-24s %4d steps checked, max |contact cost| %.3g, healthy steps %d\n", name, steps,
               max_contact, healthy_steps);
        free(obs);
        free_instance(env, inst);
        nevo_env_free(env);
    }
}

/* --- health edges -------------------------------------------------------------------- */

typedef struct Edge {
    int index; /* into the state vector [time, qpos, qvel, warmstart, ref_x] */
    double value;
    bool healthy;
} Edge;

static void check_edges(const char *name, const Edge *edges, int n) {
    NevoEnv *env = open_env(name);
    const NevoEnvSpec *s = nevo_env_spec(env);
    void *inst = new_instance(env);
    float *obs = malloc(sizeof(float) * (size_t)s->obs_dim);
    double *rest = malloc(sizeof(double) * (size_t)s->state_dim);
    double *st = malloc(sizeof(double) * (size_t)s->state_dim);
    nevo_env_reset(env, inst, 0, obs);
    nevo_env_get_state(env, inst, rest);
    for (int i = 0; i < n; i++) {
        memcpy(st, rest, sizeof(double) * (size_t)s->state_dim);
        st[edges[i].index] = edges[i].value;
        NevoError err = {0};
        CHECK_MSG(nevo_env_set_state(env, inst, st, 0, obs, &err) == NEVO_OK, "%s", err.msg);
        CHECK_MSG(nevo_mj_healthy(env, inst) == edges[i].healthy, "%s: state[%d] = %.17g should be %s",
                  name, edges[i].index, edges[i].value, edges[i].healthy ? "healthy" : "unhealthy");
    }
    free(rest), free(st), free(obs);
    free_instance(env, inst);
    nevo_env_free(env);
}

TEST(mujoco_health_edges) {
    const double eps = 1e-9;
    /* state index of qpos[i] is 1 + i; of qvel[i] is 1 + nq + i */
    const Edge hopper[] = {
        {1 + 1, 0.7, false},   {1 + 1, 0.7 + eps, true},  {1 + 1, 150, true}, /* z has no upper bound */
        {1 + 2, 0.2, false},   {1 + 2, 0.2 - eps, true},  {1 + 2, -0.2, false},
        {1 + 3, 100, false},   {1 + 3, 100 - eps, true},  {1 + 6 + 5, -100, false},
        {1 + 6 + 0, 99, true}, {1 + 0, 1e6, true}, /* x is not part of the state check */
    };
    check_edges("mujoco/hopper", hopper, (int)(sizeof hopper / sizeof hopper[0]));
    const Edge walker[] = {
        {1 + 1, 0.8, false}, {1 + 1, 0.8 + eps, true}, {1 + 1, 2.0, false}, {1 + 1, 2.0 - eps, true},
        {1 + 2, 1.0, false}, {1 + 2, 1.0 - eps, true}, {1 + 2, -1.0, false}, {1 + 9 + 3, 1e3, true},
    };
    check_edges("mujoco/walker2d", walker, (int)(sizeof walker / sizeof walker[0]));
    /* Ant's interval is closed */
    const Edge ant[] = {
        {1 + 2, 0.2, true}, {1 + 2, 0.2 - eps, false}, {1 + 2, 1.0, true}, {1 + 2, 1.0 + eps, false},
    };
    check_edges("mujoco/ant", ant, (int)(sizeof ant / sizeof ant[0]));
    const Edge humanoid[] = {
        {1 + 2, 1.0, false}, {1 + 2, 1.0 + eps, true}, {1 + 2, 2.0, false}, {1 + 2, 2.0 - eps, true},
    };
    check_edges("mujoco/humanoid", humanoid, (int)(sizeof humanoid / sizeof humanoid[0]));
    /* Humanoid-v1: done when z < 1 or z > 2, so both ends are alive */
    const Edge trap[] = {
        {1 + 2, 1.0, true}, {1 + 2, 1.0 - eps, false}, {1 + 2, 2.0, true}, {1 + 2, 2.0 + eps, false},
    };
    check_edges("mujoco/humanoid_trap", trap, (int)(sizeof trap / sizeof trap[0]));
    const Edge pendulum[] = {
        {1 + 1, 0.2, true}, {1 + 1, 0.2 + eps, false}, {1 + 1, -0.2 - eps, false}, {1 + 0, 0.9, true},
    };
    check_edges("mujoco/invertedpendulum", pendulum, (int)(sizeof pendulum / sizeof pendulum[0]));
}

/* One step from a set state: the reward and flags that follow. */
static NevoStepResult step_from(NevoEnv *env, int index, double value, double *x_before_out,
                                const mjData **d_out, void **inst_out) {
    const NevoEnvSpec *s = nevo_env_spec(env);
    void *inst = new_instance(env);
    float *obs = malloc(sizeof(float) * (size_t)s->obs_dim);
    double *st = malloc(sizeof(double) * (size_t)s->state_dim);
    nevo_env_reset(env, inst, 0, obs);
    nevo_env_get_state(env, inst, st);
    st[index] = value;
    NevoError err = {0};
    CHECK(nevo_env_set_state(env, inst, st, 0, obs, &err) == NEVO_OK);
    *x_before_out = st[s->state_dim - 1];
    float zero[NEVO_ENV_MAX_ACT_DIM] = {0};
    NevoStepResult r;
    nevo_env_step(env, inst, zero, obs, &r);
    *d_out = nevo_mj_data(env, inst);
    *inst_out = inst;
    free(obs), free(st);
    return r;
}

/* Unhealthy terminates and loses the healthy reward; with terminate_when_unhealthy off
 * it only loses the reward; the trap pays its +5 even on the last step. */
TEST(mujoco_unhealthy_step) {
    const NevoEnvOption keep_going = {"terminate_when_unhealthy", 0};
    for (int off = 0; off < 2; off++) {
        NevoEnv *env = off ? open_env_opts("mujoco/hopper", &keep_going, 1) : open_env("mujoco/hopper");
        double x0;
        const mjData *d;
        void *inst;
        NevoStepResult r = step_from(env, 1 + 2, 0.6, &x0, &d, &inst); /* pitch 0.6 */
        CHECK_EQ_INT(r.terminated, !off);
        CHECK_MSG(close_enough(r.reward, (d->qpos[0] - x0) / 0.008, 1e-6), "reward %g", r.reward);
        free_instance(env, inst);
        nevo_env_free(env);
    }
    NevoEnv *env = open_env("mujoco/humanoid");
    const mjModel *m = nevo_mj_model(env);
    double x0;
    const mjData *d;
    void *inst;
    /* above the healthy band (no contact, so one step cannot bring it back) */
    NevoStepResult r = step_from(env, 1 + 2, 2.3, &x0, &d, &inst);
    CHECK(r.terminated);
    Expected e = expected_step("mujoco/humanoid", m, d, x0, (float[17]){0}, 5);
    CHECK_NEAR(e.terms[1], 0, 0);
    CHECK_MSG(close_enough(r.reward, e.reward, 1e-6), "humanoid reward %g vs %g", r.reward, e.reward);
    free_instance(env, inst);
    nevo_env_free(env);

    env = open_env("mujoco/humanoid_trap");
    m = nevo_mj_model(env);
    r = step_from(env, 1 + 2, 2.3, &x0, &d, &inst);
    CHECK(r.terminated);
    e = expected_step("mujoco/humanoid_trap", m, d, x0, (float[17]){0}, 5);
    CHECK_NEAR(e.terms[1], 5, 0);
    CHECK_MSG(close_enough(r.reward, e.reward, 1e-6), "trap reward %g vs %g", r.reward, e.reward);
    free_instance(env, inst);
    nevo_env_free(env);

    /* InvertedPendulum v5: the terminating step pays 0 */
    env = open_env("mujoco/invertedpendulum");
    r = step_from(env, 1 + 1, 0.5, &x0, &d, &inst);
    CHECK(r.terminated);
    CHECK_NEAR(r.reward, 0, 0);
    free_instance(env, inst);
    nevo_env_free(env);
}

/* --- determinism and ownership ------------------------------------------------------- */

/* Runs up to n steps with the stream's actions, stopping when the episode ends;
 * records obs and rewards; returns the steps taken. */
static int run_steps(NevoEnv *env, void *inst, NevoRng *rng, int n, float *obs_log, float *rew_log) {
    const NevoEnvSpec *s = nevo_env_spec(env);
    float a[NEVO_ENV_MAX_ACT_DIM];
    for (int t = 0; t < n; t++) {
        random_action(s, rng, a);
        NevoStepResult r;
        nevo_env_step(env, inst, a, obs_log + (size_t)t * s->obs_dim, &r);
        rew_log[t] = r.reward;
        if (r.terminated || r.truncated) return t + 1;
    }
    return n;
}

static bool same_run(const float *o1, const float *r1, int n1, const float *o2, const float *r2, int n2,
                     size_t od) {
    return n1 == n2 && memcmp(o1, o2, sizeof(float) * (size_t)n1 * od) == 0 &&
           memcmp(r1, r2, sizeof(float) * (size_t)n1) == 0;
}

TEST(mujoco_determinism_and_state) {
    enum { K = 2, N = 60 };
    for (int c = 0; c < N_CASES; c++) {
        const char *name = cases[c].name;
        NevoEnv *env = open_env(name);
        const NevoEnvSpec *s = nevo_env_spec(env);
        size_t od = (size_t)s->obs_dim, isz = nevo_env_instance_size(env);
        float *o1 = calloc(N * od, sizeof(float)), *o2 = calloc(N * od, sizeof(float));
        float r1[N], r2[N], first_a[512], first_b[512];
        void *a = new_instance(env), *b = new_instance(env);

        /* the same seed and actions give the same episode, on any instance */
        NevoRng ra, rb;
        nevo_env_reset(env, a, 1234, first_a);
        nevo_env_reset(env, b, 1234, first_b);
        CHECK(memcmp(first_a, first_b, sizeof(float) * od) == 0);
        nevo_rng_init(&ra, 9, NEVO_RNG_POLICY, 0, 0, 0);
        nevo_rng_init(&rb, 9, NEVO_RNG_POLICY, 0, 0, 0);
        int n1 = run_steps(env, a, &ra, N, o1, r1);
        int n2 = run_steps(env, b, &rb, N, o2, r2);
        CHECK_MSG(same_run(o1, r1, n1, o2, r2, n2, od), "%s: same seed, different episodes", name);
        /* another seed, another start */
        nevo_env_reset(env, b, 1235, first_b);
        CHECK_MSG(memcmp(first_a, first_b, sizeof(float) * od) != 0, "%s: seeds 1234 and 1235 agree", name);

        /* get_state after K steps, set_state elsewhere: the rest of the episode is
         * identical bit for bit (the warm start and ref_x make it so) */
        nevo_env_reset(env, a, 77, first_a);
        nevo_rng_init(&ra, 5, NEVO_RNG_POLICY, 0, 0, 0);
        CHECK_MSG(run_steps(env, a, &ra, K, o1, r1) == K, "%s: episode ended within %d steps", name, K);
        double *st = malloc(sizeof(double) * (size_t)s->state_dim);
        nevo_env_get_state(env, a, st);
        NevoRng saved = ra;
        n1 = run_steps(env, a, &ra, N - K, o1, r1);
        NevoError err = {0};
        CHECK(nevo_env_set_state(env, b, st, K, first_b, &err) == NEVO_OK);
        rb = saved;
        n2 = run_steps(env, b, &rb, N - K, o2, r2);
        CHECK_MSG(same_run(o1, r1, n1, o2, r2, n2, od),
                  "%s: set_state(get_state()) does not continue the episode (%d, %d steps)", name, n1, n2);
        free(st);

        /* moving an instance (memcpy, the old bytes dropped) keeps its episode */
        nevo_env_reset(env, a, 31, first_a);
        nevo_rng_init(&ra, 6, NEVO_RNG_POLICY, 0, 0, 0);
        CHECK_MSG(run_steps(env, a, &ra, K, o1, r1) == K, "%s: episode ended within %d steps", name, K);
        void *moved = malloc(isz);
        memcpy(moved, a, isz);
        memset(a, 0, isz); /* a is now a fresh, empty instance */
        n1 = run_steps(env, moved, &ra, N - K, o1, r1);
        nevo_env_reset(env, b, 31, first_b);
        nevo_rng_init(&rb, 6, NEVO_RNG_POLICY, 0, 0, 0);
        CHECK(run_steps(env, b, &rb, K, o2, r2) == K);
        n2 = run_steps(env, b, &rb, N - K, o2, r2);
        CHECK_MSG(same_run(o1, r1, n1, o2, r2, n2, od), "%s: a moved instance changed its episode", name);
        free_instance(env, moved);
        free_instance(env, a);
        free_instance(env, b);
        free(o1), free(o2);
        nevo_env_free(env);
    }
}

/* Bytes the process holds in malloc, mmapped blocks included (an mjData is megabytes). */
static size_t heap_in_use(void) {
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static NevoPolicy *small_policy(const NevoEnv *env) {
    NevoPolicyConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.n_hidden = 1;
    cfg.hidden[0] = 8;
    strcpy(cfg.activation, "tanh");
    strcpy(cfg.init, "scaled");
    NevoPolicy *p = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_policy_new(nevo_env_spec(env), &cfg, 0, &p, &err) == NEVO_OK, "%s", err.msg);
    return p;
}

/* The evaluator gives every task the same episode at any thread and slot count (slot
 * moves swap instances, each keeping its own mjData), and frees every mjData it made. */
TEST(mujoco_evaluator_slots_and_ownership) {
    enum { NETS = 6, EPS = 3, TASKS = NETS * EPS };
    NevoEnv *env = open_env("mujoco/hopper");
    nevo_env_set_max_steps(env, 150);
    NevoPolicy *pol = small_policy(env);
    size_t stride = pol->nparams;
    float *params = calloc(stride * NETS, sizeof(float));
    NevoPool *pool1 = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new((size_t)1 << 16, pool1);
    for (int j = 0; j < NETS; j++) nevo_policy_init_params(pol, noise, 11, 0, (uint32_t)j, params + stride * j);
    nevo_noise_free(noise);
    NevoTask tasks[TASKS];
    for (int i = 0; i < TASKS; i++) {
        tasks[i].net = (i * 5) % NETS;
        tasks[i].flags = 0;
        tasks[i].seed = nevo_rng_derive(3, NEVO_RNG_ENV_SEED, 0, (uint32_t)tasks[i].net, (uint32_t)(i / NETS));
    }
    NevoEpisode ref[TASKS];
    NevoEvaluator *ev = nevo_evaluator_new(env, pol, pool1, 1);
    NevoError err = {0};
    CHECK_MSG(nevo_evaluate(ev, params, stride, tasks, TASKS, ref, NULL, &err) == NEVO_OK, "%s", err.msg);
    nevo_evaluator_free(ev);
    int lengths = 0;
    for (int i = 0; i < TASKS; i++) lengths += ref[i].length;
    CHECK(lengths > TASKS);

    size_t before = heap_in_use();
    static const int threads[2] = {2, 3}, slots[3] = {1, 2, 5};
    for (int a = 0; a < 2; a++) {
        NevoPool *pool = nevo_pool_new(threads[a]);
        for (int b = 0; b < 3; b++) {
            ev = nevo_evaluator_new(env, pol, pool, slots[b]);
            for (int rep = 0; rep < 2; rep++) {
                NevoEpisode res[TASKS];
                CHECK(nevo_evaluate(ev, params, stride, tasks, TASKS, res, NULL, &err) == NEVO_OK);
                for (int i = 0; i < TASKS; i++)
                    CHECK_MSG(res[i].ret == ref[i].ret && res[i].length == ref[i].length &&
                                  res[i].bc[0] == ref[i].bc[0],
                              "%d threads %d slots task %d: %g/%d vs %g/%d", threads[a], slots[b], i,
                              res[i].ret, res[i].length, ref[i].ret, ref[i].length);
            }
            nevo_evaluator_free(ev);
        }
        nevo_pool_free(pool);
    }
    size_t after = heap_in_use();
    /* one leaked mjData of the hopper would be over a megabyte */
    CHECK_MSG(after < before + (256u << 10), "heap grew by %zu bytes: an mjData leaked", after - before);
    free(params);
    nevo_policy_free(pol);
    nevo_pool_free(pool1);
    nevo_env_free(env);
}

/* The final behaviour characterisation is the whole-body centre of mass. */
TEST(mujoco_bc_is_centre_of_mass) {
    for (int c = 0; c < N_CASES; c++) {
        const char *name = cases[c].name;
        if (is(name, "invertedpendulum")) continue;
        NevoEnv *env = open_env(name);
        const NevoEnvSpec *s = nevo_env_spec(env);
        const mjModel *m = nevo_mj_model(env);
        void *inst = new_instance(env);
        float *obs = malloc(sizeof(float) * (size_t)s->obs_dim), a[NEVO_ENV_MAX_ACT_DIM], bc[NEVO_ENV_MAX_BC];
        NevoRng rng;
        nevo_rng_init(&rng, 4, NEVO_RNG_POLICY, 0, 0, 0);
        nevo_env_reset(env, inst, 8, obs);
        for (int t = 0; t < 40 && !nevo_env_done(env, inst); t++) {
            NevoStepResult r;
            random_action(s, &rng, a);
            nevo_env_step(env, inst, a, obs, &r);
        }
        nevo_env_bc(env, inst, obs, bc);
        const mjData *d = nevo_mj_data(env, inst);
        for (int k = 0; k < s->bc_dim; k++)
            CHECK_MSG(bc[k] == (float)com(m, d, k), "%s bc[%d] %g vs %g", name, k, bc[k], com(m, d, k));
        free(obs);
        free_instance(env, inst);
        nevo_env_free(env);
    }
}

/* --- random-policy returns ------------------------------------------------------------ */

/* Uniform random actions, 8 episodes each. The bands follow from the reward terms:
 * HalfCheetah pays 0.1 |a|^2 = 0.2 a step on average (6 actions, E[a^2] = 1/3) over
 * 1000 steps plus a small drift; Swimmer barely moves; a random Hopper, Walker or
 * Humanoid falls within tens of steps earning about its healthy reward per step (1, 1,
 * 5); Ant pays 0.5 x 8 / 3 = 1.33 for controls against its +1 and lives long;
 * InvertedPendulum falls in a handful of steps. Gymnasium's random returns (about
 * -280, 18, 2, -60, 120, 0, 5 as commonly reported) lie inside. */
TEST(mujoco_random_policy_returns) {
    static const struct {
        const char *name;
        double lo, hi;
    } bands[] = {
        {"mujoco/hopper", 5, 120},       {"mujoco/halfcheetah", -450, -150}, {"mujoco/walker2d", -20, 100},
        {"mujoco/ant", -700, 50},        {"mujoco/humanoid", 50, 300},       {"mujoco/swimmer", -40, 40},
        {"mujoco/invertedpendulum", 1, 40}, {"mujoco/humanoid_trap", 50, 300},
    };
    for (int c = 0; c < N_CASES; c++) {
        NevoEnv *env = open_env(bands[c].name);
        const NevoEnvSpec *s = nevo_env_spec(env);
        void *inst = new_instance(env);
        float *obs = malloc(sizeof(float) * (size_t)s->obs_dim), a[NEVO_ENV_MAX_ACT_DIM];
        double total = 0, length = 0;
        enum { EPISODES = 8 };
        for (int ep = 0; ep < EPISODES; ep++) {
            NevoRng rng;
            nevo_rng_init(&rng, 2025, NEVO_RNG_POLICY, 0, (uint32_t)ep, 0);
            nevo_env_reset(env, inst, nevo_rng_derive(2025, NEVO_RNG_ENV_SEED, 0, 0, (uint32_t)ep), obs);
            NevoStepResult r = {0};
            while (!r.terminated && !r.truncated) {
                random_action(s, &rng, a);
                nevo_env_step(env, inst, a, obs, &r);
                total += r.reward;
                length++;
            }
        }
        double mean = total / EPISODES;
        printf("    %-24s random return %9.2f, length %7.1f\n", bands[c].name, mean, length / EPISODES);
        CHECK_MSG(mean >= bands[c].lo && mean <= bands[c].hi, "%s: random return %g outside [%g, %g]",
                  bands[c].name, mean, bands[c].lo, bands[c].hi);
        free(obs);
        free_instance(env, inst);
        nevo_env_free(env);
    }
}

/* --- failures --------------------------------------------------------------------------- */

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs(text, f);
    fclose(f);
}

TEST(mujoco_model_file_errors) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    /* NEVO_MODELS pointing at a directory without the file */
    setenv("NEVO_MODELS", test_tmpdir(), 1);
    CHECK(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_ERR_IO);
    CHECK(env == NULL);
    CHECK_CONTAINS(err.msg, "hopper.xml");
    CHECK_CONTAINS(err.msg, "NEVO_MODELS");
    /* a file MuJoCo cannot parse: its message comes through */
    char path[1024];
    snprintf(path, sizeof path, "%s/hopper.xml", test_tmpdir());
    write_file(path, "<mujoco><worldbody><body><geom type='sphere'/></body></worldbody>\n");
    CHECK(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, "cannot load model");
    CHECK_CONTAINS(err.msg, path);
    /* a valid model of another robot */
    write_file(path, "<mujoco><worldbody><body><joint type='slide'/><geom size='0.1'/></body>"
                     "</worldbody></mujoco>\n");
    CHECK(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "nq=1");
    CHECK_CONTAINS(err.msg, "needs nq=6");
    /* nevo's own hopper with one value changed: a stack MuJoCo runs out of mid-step (it
     * aborted the process), a zero or NaN timestep, a mass beyond any robot's, a NaN or
     * huge control range (these ran, meaninglessly) */
    char own[1100];
    snprintf(own, sizeof own, "%s/models/mujoco/hopper.xml", getenv("PWD"));
    char *xml = test_read_file(own, NULL);
    CHECK(xml != NULL);
    static const struct {
        const char *find, *put, *msg;
    } bad[] = {
        {"<option ", "<size nstack=\"270\"/><option ", "sets nstack=270, below the"},
        {"<option ", "<size njmax=\"2000\"/><option ", "more than the"},
        {"timestep=\"0.002\"", "timestep=\"0\"", "has timestep 0"},
        {"timestep=\"0.002\"", "timestep=\"nan\"", "has timestep nan"},
        {"<geom name=\"torso_geom\"", "<geom name=\"torso_geom\" density=\"1e300\"", "body 1 has mass 3.66"},
        {"ctrlrange=\"-1 1\"", "ctrlrange=\"nan nan\"", "has ctrlrange [nan, nan]"},
        {"ctrlrange=\"-1 1\"", "ctrlrange=\"-1e300 1e300\"", "has ctrlrange [-1e+300, 1e+300]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *at = strstr(xml, bad[i].find);
        CHECK_MSG(at, "hopper.xml lacks %s", bad[i].find);
        FILE *f = fopen(path, "w");
        CHECK(f);
        fprintf(f, "%.*s%s%s", (int)(at - xml), xml, bad[i].put, at + strlen(bad[i].find));
        fclose(f);
        setenv("NEVO_MODELS", test_tmpdir(), 1);
        memset(&err, 0, sizeof err);
        CHECK_MSG(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_ERR_INVALID, "%s: %s", bad[i].put,
                  err.msg);
        CHECK(env == NULL);
        CHECK_CONTAINS(err.msg, bad[i].msg);
    }
    free(xml);
    /* a FIFO in the model's place: refused, where mj_loadXML would wait for a writer */
    CHECK(remove(path) == 0 && mkfifo(path, 0644) == 0);
    CHECK(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, "is not a regular file");
    CHECK(remove(path) == 0);
    /* files the model names, which MuJoCo reads itself: an included model file and a
     * mesh (in its meshdir) that are FIFOs, and includes nested without end */
    char body[1100], mesh_dir[1100], mesh[1200], top[1100];
    snprintf(own, sizeof own, "%s/models/mujoco/humanoid.xml", getenv("PWD"));
    xml = test_read_file(own, NULL);
    CHECK(xml != NULL);
    snprintf(top, sizeof top, "%s/humanoid.xml", test_tmpdir());
    snprintf(body, sizeof body, "%s/humanoid_body.xml", test_tmpdir());
    write_file(top, xml);
    free(xml);
    CHECK(mkfifo(body, 0644) == 0);
    CHECK(nevo_env_new("mujoco/humanoid", NULL, 0, &env, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, "humanoid_body.xml, named in");
    CHECK_CONTAINS(err.msg, "is not a regular file");
    CHECK(remove(body) == 0);
    write_file(body, "<mujoco><include file=\"humanoid_body.xml\"/></mujoco>\n");
    CHECK(nevo_env_new("mujoco/humanoid", NULL, 0, &env, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "humanoid_body.xml includes itself");
    /* a chain of 9 includes, each a file of its own */
    for (int i = 0; i < 10; i++) {
        char link[1100], next[64];
        snprintf(link, sizeof link, i ? "%s/chain%d.xml" : "%s/humanoid_body.xml", test_tmpdir(), i);
        snprintf(next, sizeof next, "chain%d.xml", i + 1);
        FILE *f = fopen(link, "w");
        CHECK(f != NULL);
        fprintf(f, i < 9 ? "<mujoco><include file = '%s' /></mujoco>\n" : "<mujoco/>\n", next);
        fclose(f);
    }
    CHECK(nevo_env_new("mujoco/humanoid", NULL, 0, &env, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "includes nest more than 8 deep");
    CHECK_CONTAINS(err.msg, "chain8.xml");
    for (int i = 1; i < 10; i++) {
        char link[1100];
        snprintf(link, sizeof link, "%s/chain%d.xml", test_tmpdir(), i);
        CHECK(remove(link) == 0);
    }
    CHECK(remove(body) == 0 && remove(top) == 0);
    snprintf(mesh_dir, sizeof mesh_dir, "%s/meshes", test_tmpdir());
    snprintf(mesh, sizeof mesh, "%s/m.stl", mesh_dir);
    CHECK(mkdir(mesh_dir, 0755) == 0 && mkfifo(mesh, 0644) == 0);
    write_file(path, "<mujoco><compiler meshdir='meshes'/><asset><mesh name='m' file='m.stl'/></asset>"
                     "<worldbody/></mujoco>\n");
    CHECK(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, "m.stl, named in");
    /* the main file's meshdir for an included file's mesh, an absolute meshdir, a cube
     * map's face (fileright) */
    char part[1100], abs_mesh[1300];
    snprintf(part, sizeof part, "%s/part.xml", test_tmpdir());
    write_file(part, "<mujoco><asset><mesh name='m' file='m.stl'/></asset></mujoco>\n");
    write_file(path, "<mujoco><compiler meshdir='meshes'/><include file='part.xml'/><worldbody/></mujoco>\n");
    CHECK(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, "m.stl, named in");
    CHECK_CONTAINS(err.msg, "part.xml");
    snprintf(abs_mesh, sizeof abs_mesh, "<mujoco><compiler meshdir=\"%s\"/><asset><mesh name='m' file='m.stl'/>"
             "</asset><worldbody/></mujoco>\n", mesh_dir);
    write_file(path, abs_mesh);
    CHECK(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, "m.stl, named in");
    write_file(path, "<mujoco><compiler texturedir='meshes'/><asset><texture type='skybox' fileright='m.stl'/>"
                     "</asset><worldbody/></mujoco>\n");
    CHECK(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, "m.stl, named in");
    /* read as MuJoCo's XML parser reads it: a quote in a comment, an entity, a vertical
     * tab between attributes, spaces around '=', the second of two compiler elements */
    static const char *const hidden[] = {
        "<mujoco><!-- file=\" --><compiler meshdir='meshes'/><asset><mesh file=\"m.stl\"/></asset></mujoco>\n",
        "<mujoco><compiler meshdir='meshes'/><asset><mesh file='m&#46;st&#x6C;'/></asset></mujoco>\n",
        "<mujoco><compiler meshdir='meshes'/><asset><mesh name='m'\vfile='m.stl'/></asset></mujoco>\n",
        "<mujoco><compiler meshdir = 'meshes'/><asset><mesh file\n=\t\"m.stl\"/></asset></mujoco>\n",
        "<mujoco><compiler meshdir='x'/><compiler meshdir='meshes'/><asset><mesh file='m.stl'/></asset></mujoco>\n",
    };
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
        write_file(path, hidden[i]);
        CHECK_MSG(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_ERR_IO, "%s", hidden[i]);
        CHECK_CONTAINS(err.msg, "m.stl, named in");
    }
    /* an empty file names none (MuJoCo's reading), and a file in text or a comment is
     * no attribute: MuJoCo's own message, not the check's */
    write_file(path, "<mujoco><!-- <mesh file='m.stl'/> --><compiler meshdir='meshes'/>file='m.stl'"
                     "<asset><texture file=''/></asset></mujoco>\n");
    CHECK(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) != NEVO_OK);
    CHECK_MSG(strstr(err.msg, "named in") == NULL, "%s", err.msg);
    CHECK(remove(mesh) == 0 && rmdir(mesh_dir) == 0 && remove(path) == 0 && remove(part) == 0);
    /* without NEVO_MODELS, from elsewhere: the build's own models directory */
    unsetenv("NEVO_MODELS");
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd));
    CHECK(chdir(test_tmpdir()) == 0);
    CHECK_MSG(nevo_env_new("mujoco/hopper", NULL, 0, &env, &err) == NEVO_OK, "%s", err.msg);
    nevo_env_free(env);
    CHECK(chdir(cwd) == 0);
}

TEST(mujoco_options) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    const NevoEnvOption bad[] = {
        {"frame_skip", 0}, {"frame_skip", 1.5}, {"reset_noise_scale", -1}, {"terminate_when_unhealthy", 2},
    };
    for (int i = 0; i < 4; i++) {
        CHECK(nevo_env_new("mujoco/hopper", &bad[i], 1, &env, &err) == NEVO_ERR_INVALID);
        CHECK_CONTAINS(err.msg, bad[i].key);
    }
    /* HalfCheetah never terminates, so it takes no terminate_when_unhealthy */
    const NevoEnvOption term = {"terminate_when_unhealthy", 0};
    CHECK(nevo_env_new("mujoco/halfcheetah", &term, 1, &env, &err) == NEVO_ERR_INVALID);
    /* frame_skip sets dt; reset_noise_scale 0 starts exactly at rest */
    const NevoEnvOption good[] = {{"frame_skip", 8}, {"reset_noise_scale", 0}};
    env = open_env_opts("mujoco/hopper", good, 2);
    const MjParams *p = nevo_env_params(env);
    CHECK_EQ_INT(p->frame_skip, 8);
    CHECK_NEAR(p->dt, 0.016, 1e-15);
    void *inst = new_instance(env);
    float obs[11];
    nevo_env_reset(env, inst, 5, obs);
    const float rest[11] = {1.25f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(memcmp(obs, rest, sizeof obs) == 0);
    free_instance(env, inst);
    nevo_env_free(env);
}

/* A diverging state must not crash: MuJoCo replaces it by the rest state (with a
 * warning on stderr) and the env reports what it then observes; nothing is written to
 * the working directory (MuJoCo's default handler would write MUJOCO_LOG.TXT). */
TEST(mujoco_divergence_does_not_crash) {
    char models[1100], cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd));
    snprintf(models, sizeof models, "%s/models/mujoco", cwd);
    setenv("NEVO_MODELS", models, 1);
    CHECK(chdir(test_tmpdir()) == 0);
    NevoEnv *env = open_env("mujoco/humanoid");
    const NevoEnvSpec *s = nevo_env_spec(env);
    void *inst = new_instance(env);
    float *obs = malloc(sizeof(float) * (size_t)s->obs_dim);
    double *st = malloc(sizeof(double) * (size_t)s->state_dim);
    nevo_env_reset(env, inst, 1, obs);
    nevo_env_get_state(env, inst, st);
    for (int i = 0; i < 23; i++) st[1 + 24 + i] = 1e12; /* qvel beyond MuJoCo's 1e10 */
    NevoError err = {0};
    CHECK(nevo_env_set_state(env, inst, st, 0, obs, &err) == NEVO_OK);
    float a[17] = {0};
    NevoStepResult r;
    nevo_env_step(env, inst, a, obs, &r);
    const mjData *d = nevo_mj_data(env, inst);
    CHECK(d->warning[mjWARN_BADQVEL].number > 0);
    /* non-finite values are refused at the door */
    st[3] = NAN;
    CHECK(nevo_env_set_state(env, inst, st, 0, obs, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "state[3]");
    struct stat sb;
    CHECK_MSG(stat("MUJOCO_LOG.TXT", &sb) != 0, "MuJoCo wrote MUJOCO_LOG.TXT");
    free(obs), free(st);
    free_instance(env, inst);
    nevo_env_free(env);
    CHECK(chdir(cwd) == 0);
}

/* Pixels of the robots' body colour (rgba 0.75 0.55 0.35, lit and shaded): red over
 * green over blue by clear margins; floor (pale green), floor lines and sky (blue) are
 * not. */
static int body_mask(const uint8_t *rgb, int n, uint8_t *mask) {
    int count = 0;
    for (int i = 0; i < n; i++) {
        int r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
        mask[i] = r > g + 20 && g > b + 20 && r > 60;
        count += mask[i];
    }
    return count;
}

static void render_checked(const NevoEnv *env, const void *inst, uint8_t *rgb) {
    CHECK_MSG(nevo_env_render(env, inst, rgb), "%s cannot draw", nevo_env_spec(env)->name);
}

TEST(mujoco_render_hopper) {
    char why[512];
    if (!nevo_mj_render_available(why, sizeof why)) {
        printf("skip: no OpenGL context for MuJoCo's renderer: %s\n", why);
        return;
    }
    printf("renderer: %s\n", why);
    NevoEnv *env = open_env("mujoco/hopper");
    const NevoEnvSpec *s = nevo_env_spec(env);
    int w, h;
    nevo_env_render_size(env, &w, &h);
    CHECK_EQ_INT(w, NEVO_MJ_RENDER_W);
    CHECK_EQ_INT(h, NEVO_MJ_RENDER_H);
    int n = w * h;
    uint8_t *a = malloc((size_t)n * 3), *b = malloc((size_t)n * 3), *c = malloc((size_t)n * 3);
    uint8_t *ma = malloc((size_t)n), *mb = malloc((size_t)n);
    void *inst = new_instance(env);
    float obs[11];
    nevo_env_reset(env, inst, 1, obs);
    /* [time, qpos (x, z, pitch, thigh, leg, foot), qvel (6), warm start (6), ref_x] */
    enum { SD = 1 + 6 + 6 + 6 + 1 };
    CHECK_EQ_INT(s->state_dim, SD);
    double st[SD], after[SD], bent[SD];
    nevo_env_get_state(env, inst, st);
    render_checked(env, inst, a);
    /* drawing does not touch the simulation */
    nevo_env_get_state(env, inst, after);
    CHECK(memcmp(st, after, sizeof st) == 0);

    /* not uniform: sky above (blue over red), floor below, the upright body between */
    int distinct = 0;
    for (int i = 1; i < n && distinct < 50; i++) distinct += memcmp(a + 3 * i, a, 3) != 0;
    CHECK_MSG(distinct >= 50, "the picture is (nearly) one colour");
    const uint8_t *top = a + 3 * (w / 2);
    CHECK_MSG(top[2] > top[0] + 30, "top centre %d,%d,%d is not sky", top[0], top[1], top[2]);
    double sum[3] = {0, 0, 0};
    for (int x = 0; x < w; x++)
        for (int k = 0; k < 3; k++) sum[k] += a[3 * ((size_t)(h - 1) * w + x) + k];
    CHECK_MSG(sum[1] > sum[0] + 5 * w && sum[1] > sum[2] + 5 * w && sum[1] > 120.0 * w,
              "bottom row (mean %.0f,%.0f,%.0f) is not the pale green floor", sum[0] / w, sum[1] / w,
              sum[2] / w);
    int na = body_mask(a, n, ma);
    CHECK_MSG(na > 500 && na < n / 4, "%d body pixels", na);
    /* the camera follows the torso: the body is centred left to right */
    double cx = 0;
    for (int i = 0; i < n; i++) cx += ma[i] * (i % w);
    cx /= na;
    CHECK_MSG(fabs(cx - w / 2.0) < w / 8.0, "body centred at x = %.1f of %d", cx, w);

    /* the same state draws the same picture */
    render_checked(env, inst, b);
    CHECK(memcmp(a, b, (size_t)n * 3) == 0);

    /* thigh and leg folded, torso pitched: the body's pixels move */
    memcpy(bent, st, sizeof bent);
    bent[1 + 2] = 0.15;  /* pitch */
    bent[1 + 3] = -1.2;  /* thigh */
    bent[1 + 4] = -1.4;  /* leg */
    NevoError err = {0};
    CHECK(nevo_env_set_state(env, inst, bent, 0, obs, &err) == NEVO_OK);
    render_checked(env, inst, b);
    int nb = body_mask(b, n, mb), moved = 0;
    for (int i = 0; i < n; i++) moved += ma[i] != mb[i];
    CHECK_MSG(nb > 300, "%d body pixels when bent", nb);
    CHECK_MSG(moved > na / 3, "only %d of %d body pixels changed", moved, na);

    /* another model drawn in between does not disturb the hopper's next picture */
    NevoEnv *sw = open_env("mujoco/swimmer");
    void *si = new_instance(sw);
    float sobs[8];
    nevo_env_reset(sw, si, 1, sobs);
    render_checked(sw, si, c);
    CHECK(body_mask(c, n, mb) > 300);
    CHECK(nevo_env_set_state(env, inst, st, 0, obs, &err) == NEVO_OK);
    render_checked(env, inst, c);
    CHECK_MSG(memcmp(a, c, (size_t)n * 3) == 0, "hopper drawn differently after the swimmer");
    free_instance(sw, si);
    nevo_env_free(sw);

    free_instance(env, inst);
    free(a), free(b), free(c), free(ma), free(mb);
    nevo_env_free(env);
}

/* nevo eval --gif works for a MuJoCo env (the random reference policy). */
TEST(mujoco_render_eval_gif) {
    char why[512];
    if (!nevo_mj_render_available(why, sizeof why)) {
        printf("skip: no OpenGL context for MuJoCo's renderer: %s\n", why);
        return;
    }
    char out[4096], gif[1100];
    snprintf(gif, sizeof gif, "%s/hopper.gif", test_tmpdir());
    int rc = test_run(out, sizeof out, "%s eval --env mujoco/hopper --policy random --episodes 1 --gif %s",
                      test_nevo_bin(), gif);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    size_t len = 0;
    char *data = test_read_file(gif, &len);
    CHECK_MSG(data && len > 1000 && memcmp(data, "GIF89a", 6) == 0, "%s: not a GIF (%zu bytes)", gif, len);
    free(data);
}
