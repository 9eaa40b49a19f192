// A Java program for TestStacksJava: round() calls mix() a hundred times, and main() calls
// round() until the seconds given have passed; run with mix() not inlined, HotSpot compiles
// both, and round()'s calls to mix() are calls from compiled code to compiled code.
public class Rounds {
    static int mix(int n) {
        int h = 0x12345678;
        for (int i = 0; i < n; i++) {
            h = (h ^ i) * 0x9e3779b1;
            h ^= h >>> 15;
        }
        return h;
    }

    static int round() {
        int acc = 0;
        for (int k = 0; k < 100; k++) acc ^= mix(3000);
        return acc;
    }

    public static void main(String[] args) {
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        int acc = 0;
        while (System.nanoTime() < end) acc ^= round();
        System.out.println("done " + acc);
    }
}
